"""Chat templates compile and render in worker processes of their own, so no template can stall the server.

The sandbox (``sandbox.py``) sizes what a template builds and ticks a clock, but only between Python
operations: one C call (a quadratic ``sum`` of lists, ``strftime`` of a huge format, Jinja's parser and
Python's ``compile`` on a huge template) holds the GIL until it returns, and every other client of the
process waits. So the work happens in a small pool of worker processes (``MAX_WORKERS``), each started
with the same interpreter (``python -m fireside.engine.prompts.worker``, ``worker.py``, or the frozen executable with
``--fireside-template-worker``), each under an address-space limit (``WORKER_MEMORY_BYTES``) and a CPU-time
limit per job, and each killed by the caller when a job runs past ``JOB_SECONDS`` of wall time. A killed
or dead worker is replaced on the next job. A worker keeps the templates it compiled (``CACHE_SIZE``,
keyed by source), so a chat pays the compile once per worker, not once per request.

``ask`` runs on the caller's thread (a server worker or the chat window's generation thread); it
waits on the pipe without the GIL. Jobs and answers are pickles over the worker's stdin and stdout
(``protocol.FramedPipe``): both ends are Fireside's own code.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections import Counter
from typing import Any

from ..errors import ContextOverflow, QueueFull, TemplateError
from ..protocol import FramedPipe, PipeClosed
from .sandbox import MAX_SECONDS

MAX_WORKERS = 4                        # template jobs at once, over every model
WORKER_MEMORY_BYTES = 1024**3          # address space of one worker (RLIMIT_AS, Linux)
JOB_SECONDS = 2 * MAX_SECONDS + 1.0    # wall time of one job (two renders under MAX_SECONDS each), then killed
START_SECONDS = 60.0                   # a worker's start-up (an interpreter and Jinja) on a loaded machine
CACHE_SIZE = 16                        # compiled templates one worker keeps
DEMOTED_NICE = 15                      # the CPU priority of a worker running a template that failed before
FLAG = "--fireside-template-worker"    # see installers/entry.py


def worker_command() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG]
    return [sys.executable, "-m", "fireside.engine.prompts.worker"]


class _Worker:
    """One worker process and the pipe to it; used by one caller at a time (the pool sees to that)."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self.sources: list[str] = []  # the templates it has compiled, oldest first (its cache's keys)
        self.pipe = FramedPipe(self.proc.stdout, self.proc.stdin)
        if self._receive(START_SECONDS).get("type") != "hello":
            self.close()
            raise TemplateError("the chat template worker did not start properly")

    def ask(self, job: dict, timeout: float) -> dict:
        try:
            self.pipe.send(job)
        except PipeClosed:
            pass  # it died: _receive says how
        return self._receive(timeout)

    def _receive(self, timeout: float) -> dict:
        timer = None
        if os.name == "posix":
            ready = select.select([self.proc.stdout], [], [], timeout)[0]
            if not ready:
                self.close()
                raise _overrun()
        else:  # no select on pipes: a timer kills the worker, which ends the read below
            timer = threading.Timer(timeout, self.proc.kill)
            timer.start()
        try:
            return self.pipe.recv()
        except PipeClosed:
            code = self.proc.wait()
            if timer is not None and not timer.is_alive():
                raise _overrun() from None
            raise _died(code) from None
        finally:
            if timer is not None:
                timer.cancel()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _overrun() -> TemplateError:
    return TemplateError(f"the model's chat template was stopped: it went over its time budget "
                         f"({JOB_SECONDS:g} seconds in its worker process)")


def _died(code: int) -> TemplateError:
    if code == -getattr(signal, "SIGXCPU", -1000):
        return _overrun()
    how = f"signal {-code}" if code < 0 else f"exit code {code}"
    return TemplateError(f"the model's chat template was stopped: its worker process ended ({how}), "
                         "most likely over its memory budget")


_SPARE = object()  # ``_Pool._gone`` for a spare worker, which held no job


class _Pool:
    """Up to ``MAX_WORKERS`` workers, started when first needed, each lent to one job at a time. Whenever a
    job takes the last idle worker, one spare starts in the background, so the next job finds it ready.
    One template's jobs hold at most ``_lanes`` workers, so a hostile model's template (a GGUF in the
    models folder) cannot keep every other model's chats waiting, and a 503; once it has failed, its
    jobs run one at a time on a demoted worker, so its CPU does not slow the runners either."""

    def __init__(self) -> None:
        self._idle: list[_Worker] = []
        self._count = 0
        self._busy: Counter[str | None] = Counter()  # jobs running, per template source
        self._slow: set[str | None] = set()  # sources whose job overran its budget or killed its worker
        self._cond = threading.Condition()

    def ask(self, job: dict) -> dict:
        source = job.get("source")
        worker = self._take(source)
        slow = source in self._slow
        if slow:
            _demote(worker)
        try:
            answer = worker.ask(job, JOB_SECONDS)
        except BaseException as exc:
            worker.close()
            self._gone(source, overran=isinstance(exc, TemplateError))
            raise
        if source is not None and source not in worker.sources:
            worker.sources = [*worker.sources, source][-CACHE_SIZE:]
        failed = "error" in answer and answer.get("kind") != "context"  # a budget, not a long chat
        if answer.get("retire") or slow:  # out of memory once (its heap is not to be trusted), or demoted
            worker.close()
            self._gone(source, overran=failed)
        else:
            with self._cond:
                self._idle.append(worker)
                self._busy[source] -= 1
                if failed:
                    self._slow.add(source)
                self._cond.notify_all()
        return answer

    def _lanes(self, source: str | None) -> int:
        """How many workers jobs of one template may hold at once: all but one, so one model's template
        never takes every worker from the others, and one once it has failed (over a budget, killed)."""
        return 1 if source in self._slow else MAX_WORKERS - 1

    def _take(self, source: str | None) -> _Worker:
        """An idle worker, one that has compiled ``source`` if any has (a compile is tens of ms, and
        requests sent together should reach their runner together), or a new one."""
        with self._cond:
            if not self._cond.wait_for(lambda: (self._idle or self._count < MAX_WORKERS)
                                       and self._busy[source] < self._lanes(source), timeout=2 * JOB_SECONDS):
                raise QueueFull(f"the chat template workers stayed busy for {2 * JOB_SECONDS:g} s; try again")
            self._busy[source] += 1
            warm = [i for i, w in enumerate(self._idle) if source in w.sources]
            worker = self._idle.pop(warm[-1] if warm else -1) if self._idle else None
            self._count += worker is None
            spare = not self._idle and self._count < MAX_WORKERS
            self._count += spare
        if spare:  # requests sent together must not each wait for a worker's start-up (an interpreter)
            threading.Thread(target=self._start_spare, name="template-worker-spare", daemon=True).start()
        if worker is not None:
            return worker
        try:
            return _Worker()
        except BaseException:
            self._gone(source)
            raise

    def _start_spare(self) -> None:
        """Start one more worker and leave it idle (runs on a thread of its own)."""
        try:
            worker = _Worker()
        except BaseException:
            self._gone()
            return
        with self._cond:
            self._idle.append(worker)
            self._cond.notify_all()

    def _gone(self, source: Any = _SPARE, overran: bool = False) -> None:
        """A worker ended; ``source`` is the template whose job it held (none for a spare)."""
        with self._cond:
            self._count -= 1
            if source is not _SPARE:
                self._busy[source] -= 1
            if overran:
                self._slow.add(source)
            self._cond.notify_all()


def _demote(worker: _Worker) -> None:
    """Lower the CPU priority of a worker about to run a template that failed before: its seconds of
    work then come from idle CPU, not from the runners decoding other chats. The worker is retired
    after the job (a process cannot raise its own priority back)."""
    if hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, worker.proc.pid, DEMOTED_NICE)
        except OSError:
            pass


_POOL = _Pool()


def ask(job: dict) -> Any:
    """Run ``job`` in a worker and return its result; a refusal raises the engine's error for it."""
    answer = _POOL.ask(job)
    if "error" in answer:
        kind = ContextOverflow if answer.get("kind") == "context" else TemplateError
        raise kind(answer["error"])
    return answer["result"]
