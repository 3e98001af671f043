"""The worker: a process of its own that lends this machine's memory and CPU to a paired device, through
llama.cpp's RPC server (``ggml_backend_rpc_start_server``) bound to loopback only.

llama.cpp's RPC protocol has neither authentication nor encryption and its deserializer has had
memory-safety advisories, so the port never leaves loopback: the only way in is the tunnel on the shared
TLS listener (``tunnel.py``), which checks the device's token first. The process caps its own address
space at the lent size plus its code (``RLIMIT_AS``), so a paired device cannot take more than it was
lent; whatever a client sends, a crash ends this process only. ``Worker`` starts it, waits until its port
answers, and stops it; what llama.cpp prints goes to ``rpc-worker.log`` in the logs folder.

Run as ``python -m fireside.engine.rpc.worker PORT THREADS CAP_BYTES [MODULE]``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..procs import stop_process

log = logging.getLogger(__name__)
START_TIMEOUT_S = 30.0
CODE_ROOM = 2 << 30  # address space beyond the lent bytes: libraries, thread stacks, glibc's arenas
LOG_KEPT = 1 << 20  # the worker's log past this size is moved to ``.1`` (the one before it dropped) at a start


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Worker:
    """One RPC server process on ``127.0.0.1:port``. ``ensure()`` starts it when it is not running (again,
    after a crash), ``stop()`` ends it (SIGTERM, then SIGKILL after a second). Thread-safe. Its output
    (llama.cpp's lines, a crash's last words) is appended to ``log_path``: a pipe nobody reads would
    stop the server once it filled."""

    def __init__(self, cap: int, threads: int, module: str | None = None, log_path: Path | None = None):
        self.cap, self.threads, self.module, self.log_path = cap, threads, module, log_path
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self._lock = threading.Lock()

    def ensure(self) -> int:
        """The port of a running worker, started now when there is none. Raises ``RuntimeError`` when it
        does not start."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return self.port
            if self.proc is not None:
                log.error("the RPC worker had ended (exit %s; its words are in %s); starting it again",
                          self.proc.returncode, self.log_path or "no log")
            self.port = _free_port()
            args = [*worker_command(), str(self.port), str(self.threads), str(self.cap), self.module or ""]
            started = self._open_log()
            try:
                self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=started, stderr=subprocess.STDOUT,
                                             start_new_session=True)
                offset = started.tell()
            finally:
                started.close()
            deadline = time.monotonic() + START_TIMEOUT_S
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    err = self._said_since(offset)
                    raise RuntimeError(f"the RPC worker did not start: {err[-400:] or f'exit {self.proc.returncode}'}")
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self.port  # a probe connection: the server serves it, sees it close, accepts the next
                time.sleep(0.05)
            self._kill()
            raise RuntimeError("the RPC worker did not start listening within 30 s")

    def stop(self) -> None:
        with self._lock:
            self._kill()

    def _open_log(self):
        if self.log_path is None:
            return open(os.devnull, "ab")  # noqa: SIM115 (handed to the child, closed here once it has it)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            if self.log_path.stat().st_size > LOG_KEPT:  # two lines a connection, some twenty connections a load
                self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
        out = open(self.log_path, "ab")  # noqa: SIM115
        out.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} RPC worker on 127.0.0.1:{self.port}\n".encode())
        out.flush()
        return out

    def _said_since(self, offset: int) -> str:
        if self.log_path is None:
            return ""
        with contextlib.suppress(OSError), open(self.log_path, "rb") as f:
            f.seek(offset)
            return f.read().decode(errors="replace").strip()
        return ""

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process(proc, grace_s=1.0)


FLAG = "--fireside-rpc-worker"  # see installers/entry.py


def worker_command() -> list[str]:
    """How to start a worker: this interpreter, or the frozen executable with its flag."""
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG]
    return [sys.executable, "-m", "fireside.engine.rpc.worker"]


def main(argv: list[str] | None = None) -> None:
    import resource

    from ..ggml import rpc_serve

    argv = sys.argv[1:] if argv is None else argv
    port, threads, cap = int(argv[0]), int(argv[1]), int(argv[2])
    module = argv[3] if len(argv) > 3 and argv[3] else None
    # the kernel's own action: a Python handler would wait for rpc_serve, a C call that never returns,
    # so SIGTERM did nothing and every stop waited out its grace for the SIGKILL
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (cap + CODE_ROOM, cap + CODE_ROOM))
    rpc_serve(f"127.0.0.1:{port}", threads, module)
    sys.exit("the RPC server stopped")


if __name__ == "__main__":
    main()
