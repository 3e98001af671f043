"""The app-side handle of one runner process: start it, send it requests, route its replies.

A reader thread takes every frame the runner sends and puts it on the queue of the request it
answers. When the runner dies (killed, crashed inside llama.cpp, out of memory), the reader sees the
pipe close and every pending request gets a ``RunnerCrashed`` naming the signal or exit code and the
runner's last log lines; the app process carries on.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import DeviceGone, QueueFull, RunnerCrashed, RuntimeFailure
from ..protocol import FramedPipe, PipeClosed

_ids = itertools.count(1)
log = logging.getLogger(__name__)

CANCEL_POLL_S = 0.02  # how often a caller waiting for its next reply looks at its cancel event


def runner_command() -> list[str]:
    """How to start a runner: the same interpreter, or the same frozen executable with a flag."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--fireside-runner"]
    return [sys.executable, "-m", "fireside.engine.runner"]


_RPC_LOST = "ggml-rpc.cpp"  # llama.cpp's RPC client aborts its process, naming its source, when a server is gone


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# glibc's malloc asks for transparent huge pages (madvise) for what it maps, such as llama.cpp's buffers
HUGE_PAGES_TUNABLE = "glibc.malloc.hugetlb=1"


class RunnerClient:
    """One runner process. Thread-safe: any thread may submit; replies come back on per-request queues."""

    def __init__(self, label: str, log_dir: Path, max_queue: int = 16, command: list[str] | None = None,
                 huge_pages: bool = False):
        self.label, self.max_queue = label, max_queue
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"runner-{time.strftime('%Y%m%d-%H%M%S')}-{next(_ids)}.log"
        self._log_file = self.log_path.open("wb")
        # GGML_NO_BACKTRACE: ggml's abort would otherwise attach gdb for a backtrace first (seconds on a busy
        # machine, before the crash is seen), and the log's last words would be gdb's, not llama.cpp's reason
        env = {**os.environ, "GGML_NO_BACKTRACE": os.environ.get("GGML_NO_BACKTRACE", "1")}
        if huge_pages:  # the plan's unmapped weights (and the KV cache) in huge pages: planner.huge_pages
            env["GLIBC_TUNABLES"] = ":".join(t for t in (env.get("GLIBC_TUNABLES"), HUGE_PAGES_TUNABLE) if t)
        self.proc = subprocess.Popen(command or runner_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log_file, bufsize=0, env=env)
        self.pipe = FramedPipe(self.proc.stdout, self.proc.stdin)
        self._pending: dict[str, queue.SimpleQueue] = {}
        self._lock = threading.Lock()
        self.dead: str | None = None
        self.signal: int | None = None  # the signal that killed the runner, once it is dead
        self.lent_by: list[str] = []  # paired devices holding some of its layers (rpc/), for a crash's words
        self.pid = self.proc.pid
        self._await_hello()
        self._reader = threading.Thread(target=self._read_loop, name=f"runner-reader-{self.pid}", daemon=True)
        self._reader.start()

    def _await_hello(self, timeout: float = 120.0) -> None:
        """Wait for the runner's first frame; a runner that dies or hangs first fails at once, with its log."""
        try:
            if os.name == "posix" and not select.select([self.proc.stdout], [], [], timeout)[0]:
                self.proc.kill()
                raise PipeClosed("no hello")
            hello = self.pipe.recv()
        except PipeClosed:
            try:
                code = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            self.signal = -code if code is not None and code < 0 else None
            self._log_file.close()
            tail = self.log_tail(8)
            raise RunnerCrashed(f"the runner for {self.label} {_describe_exit(code)} before it started"
                                + (f"; its last words: {tail}" if tail else ""), self.signal) from None
        if hello.get("type") != "hello":
            raise RuntimeFailure(f"the runner for {self.label} did not start properly")

    @property
    def alive(self) -> bool:
        return self.dead is None and self.proc.poll() is None

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._pending)

    def _read_loop(self) -> None:
        while True:
            try:
                msg = self.pipe.recv()
            except PipeClosed:
                break
            with self._lock:
                q = self._pending.get(msg.get("id"))
            if q is not None:
                q.put(msg)
        code = self.proc.wait()
        self.signal = -code if code < 0 else None
        self.dead = _describe_exit(code)
        tail = self.log_tail()
        with self._lock:
            pending, self._pending = self._pending, {}
        message = f"the runner for {self.label} {self.dead}" + (f"; its last words: {tail}" if tail else "")
        gone = bool(self.lent_by) and _RPC_LOST in self.log_tail(400)
        if gone:
            message = (f"{' or '.join(self.lent_by)} went away mid-reply: it held part of {self.label}'s layers, "
                       f"so {self.label} was unloaded (the next load plans without a device it cannot reach)")
        for q in pending.values():
            q.put({"type": "crash", "signal": self.signal, "message": message, "device_gone": gone})

    def log_tail(self, n: int = 3) -> str:
        try:
            lines = self.log_path.read_bytes().decode("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in lines[-n:])

    def submit(self, op: str, cancel: threading.Event | None = None, kill_after_s: float | None = None,
               **payload: Any) -> Iterator[dict]:
        """Send one request and yield its replies until ``result``, ``done`` or an error.

        Setting ``cancel`` (or closing the generator) tells the runner to stop within one token. With
        ``kill_after_s``, a runner that has not answered that long after being told is killed (then
        ``RunnerCrashed``): a load stuck inside llama.cpp (a warm-up, a wedged driver) never looks at
        its cancel event, and Cancel must still end it.
        """
        req_id = f"r{next(_ids)}"
        q: queue.SimpleQueue = queue.SimpleQueue()  # C, not Condition-based: one put per streamed token
        with self._lock:
            if self.dead:
                raise RunnerCrashed(f"the runner for {self.label} {self.dead}", self.signal)
            if op == "generate" and len(self._pending) >= self.max_queue:
                raise QueueFull(f"{self.label} already has {len(self._pending)} requests waiting")
            self._pending[req_id] = q
        complete, told, told_at = False, False, 0.0
        try:
            self.pipe.send({"op": op, "id": req_id, **payload})
            while True:
                try:
                    msg = q.get(timeout=CANCEL_POLL_S)
                except queue.Empty:
                    msg = None  # a crash arrives on the queue too; meanwhile, look at the cancel event
                # the caller's cancel event (a Stop button, a client gone) is looked at after each reply
                # (a token: so Stop takes effect within one) and every CANCEL_POLL_S while none comes;
                # a thread polling every request's event cost 30 us of CPU per streamed token
                if cancel is not None and not told and cancel.is_set():
                    told, told_at = True, time.monotonic()
                    self._send_cancel(req_id)
                if msg is None:
                    if told and kill_after_s is not None and time.monotonic() - told_at > kill_after_s:
                        log.warning("the runner for %s did not stop %.0f s after its %s was cancelled: killing it",
                                    self.label, kill_after_s, op)
                        self.proc.kill()  # its reader then posts the crash on this queue
                        kill_after_s = None
                    continue
                kind = msg["type"]
                if kind == "crash":
                    raise (DeviceGone if msg.get("device_gone") else RunnerCrashed)(msg["message"], msg.get("signal"))
                complete = kind in ("result", "done", "error")
                yield msg
                if complete:
                    return
        except PipeClosed as exc:
            raise RunnerCrashed(f"the runner for {self.label} {self.dead or 'went away'}", self.signal) from exc
        finally:
            with self._lock:
                self._pending.pop(req_id, None)
            if not complete and not told and self.alive:
                self._send_cancel(req_id)  # the caller stopped listening: free the runner

    def tell(self, op: str, **payload: Any) -> None:
        """Send a frame that has no reply (``threads``: this runner's share of the cores); a runner that
        is gone has nothing to be told."""
        try:
            self.pipe.send({"op": op, "id": "", **payload})
        except PipeClosed:
            pass

    def _send_cancel(self, req_id: str) -> None:
        try:
            self.pipe.send({"op": "cancel", "id": req_id})
        except PipeClosed:
            pass  # the runner is gone: nothing left to stop

    def request(self, op: str, **payload: Any) -> dict:
        """Send one request and return its ``result`` (raising on error)."""
        for msg in self.submit(op, **payload):
            if msg["type"] == "result":
                return msg
            if msg["type"] == "error":
                raise RuntimeFailure(msg.get("message", "the runner failed"))
        raise RuntimeFailure("the runner gave no result")

    def close(self, timeout: float = 5.0) -> None:
        """Stop the runner (it gives all its memory back) and wait for it."""
        if self.proc.poll() is None:
            try:
                self.pipe.send({"op": "shutdown", "id": ""})
                self.proc.wait(timeout=timeout)
            except (PipeClosed, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=timeout)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._log_file.close()
