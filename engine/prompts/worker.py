"""A chat template worker process (``python -m fireside.engine.prompts.worker``; the frozen executable with
``--fireside-template-worker``): it answers ``ChatTemplate``'s jobs from its stdin with ``templates.run_job``
until the pipe closes, under the CPU and memory limits ``renderer.py`` sets for it. ``renderer.py`` is the
caller's side (the pool that starts, feeds and kills workers); the job runner has this one home, so the
caller's side never imports the templates it asks about.
"""

from __future__ import annotations

import os
import signal
import sys
from collections import OrderedDict
from typing import Any

from ..errors import ContextOverflow, TemplateError
from ..protocol import FramedPipe, PipeClosed
from .renderer import CACHE_SIZE, JOB_SECONDS, WORKER_MEMORY_BYTES
from .templates import run_job


def _limit(cpu_seconds: float) -> None:
    """Cap this worker's memory once, and its CPU time for the next job (the CPU limit counts from start)."""
    try:
        import resource
    except ImportError:  # Windows: the caller's wall clock is the only limit
        return
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + cpu_seconds) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


def _limit_memory() -> None:
    if not sys.platform.startswith("linux"):  # macOS does not enforce RLIMIT_AS; Windows has no rlimits
        return
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))


def _serve(pipe: FramedPipe) -> None:
    compiled: OrderedDict[str, Any] = OrderedDict()
    while True:
        try:
            job = pipe.recv()
        except PipeClosed:
            return
        _limit(JOB_SECONDS)
        try:
            answer = {"result": run_job(job, compiled)}
        except ContextOverflow as exc:
            answer = {"error": str(exc), "kind": "context"}
        except TemplateError as exc:
            answer = {"error": str(exc), "retire": "memory budget" in str(exc)}
        except Exception as exc:  # a worker answers every job; a failure of its own is the template's error
            answer = {"error": f"the model's chat template failed: {type(exc).__name__}: {exc}", "retire": True}
        while len(compiled) > CACHE_SIZE:
            compiled.popitem(last=False)
        pipe.send(answer)


def main() -> None:
    """The worker process: answer jobs on stdin until it closes."""
    # Ctrl-C in a terminal reaches the whole process group: the CLI stops the reply, and the workers that
    # render its next prompt must live on (the runner ignores it the same way)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _limit_memory()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing printed by accident can corrupt a frame
    pipe = FramedPipe(sys.stdin.buffer, out)
    pipe.send({"type": "hello"})
    _serve(pipe)


if __name__ == "__main__":
    main()
