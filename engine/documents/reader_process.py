"""Documents are read in a process of their own, so no parser shares the server's GIL. pypdf (and
python-docx with lxml, or the Markdown splitter on a 32 MB file) runs Python code for seconds, and in the
server's process it holds the GIL in slices: on two busy cores another client's stream stalled 1.3-2.3 s
while a slow PDF was parsed (issue 42). A reader process runs ``read_document`` (the same readers, the same
caps checked before the work) and hands back what it made, the ``Document`` with its blocks and pages, or
the exception it raised: a ``DocumentRejected`` comes back as it was, message, ``reason`` and ``path``.

Each collection's worker holds one ``ReaderProcess``: started at its first file (``python -m
fireside.engine.documents.reader_process``, or the frozen executable with ``--fireside-document-reader``,
see ``installers/entry.py``), reused for every file after, and closed when the worker has no work left;
a process start is paid once per run of files, never per file or page. A read is stopped by killing the
process: its ``cancel`` event set (the file removed, its batch cancelled, the collections closing) kills
it within ``POLL_S``, where the in-process reader stopped within a page; a read past
``MAX_READ_SECONDS`` is killed and refused (``too_slow``); a process that dies (a crash in a C parser,
the OOM killer) fails its file with a ``DocumentRejected`` saying so (``reader_died``). The next file
starts a new process. The process runs at a lower CPU priority (nice 10, below normal on Windows), with
the server's malloc settings (``server.thread.bound_malloc_arenas``), and ends at once when its pipe
closes, so a server that stops or dies leaves no reader parsing on.

Requests and answers are pickles over the process's stdin and stdout, one answer a request: both ends
are Fireside's own code in processes Fireside started.

Threading: one ``ReaderProcess`` serves one thread at a time (its collection's worker); ``read`` blocks
that thread on the pipe, without the GIL, until the answer comes; ``close`` may be called from any thread.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import DocumentRejected, FiresideError
from .document import Document
from .limits import MAX_READ_SECONDS
from .pdf import Cancelled
from .readers import read_document

FLAG = "--fireside-document-reader"  # see installers/entry.py
POLL_S = 0.05                         # how often a read checks its cancel event and its deadline
READER_NICE = 10                      # the reader's CPU priority (Unix): reading can wait, a model's decode cannot
# glibc's malloc as the server sets it (``bound_malloc_arenas``): two arenas, and blocks from 4 MiB mapped
# on their own and given back when freed, so a reader that read one big file does not keep its peak
MALLOC_ENV = {"MALLOC_ARENA_MAX": "2", "MALLOC_MMAP_THRESHOLD_": str(4 * 1024 * 1024)}


def reader_command() -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, FLAG]
    return [sys.executable, "-m", "fireside.engine.documents.reader_process"]


class ReaderProcess:
    """A reader process, started at the first ``read`` and again after one was killed or died."""

    def __init__(self, max_seconds: float | None = None):
        self.max_seconds = max_seconds  # None: ``MAX_READ_SECONDS`` as it is when a read starts
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()  # guards ``_proc`` between ``read`` and ``close``

    @property
    def pid(self) -> int | None:
        """The process's id while one runs (None before the first read and after a close)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def read(self, path: Path | str, cancel: threading.Event | None = None) -> Document:
        """The document at ``path``, read in the reader process; raises what the reader raised there (a
        ``DocumentRejected`` naming what is wrong), ``pdf.Cancelled`` once ``cancel`` is set (the process
        is killed), or a ``DocumentRejected`` when the process ran past its time or died."""
        path = Path(path)
        proc = self._started()
        limit = MAX_READ_SECONDS if self.max_seconds is None else self.max_seconds
        watch = _Watch(proc, cancel, limit)
        try:
            pickle.dump(str(path), proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it died: the answer below says how
        watch.start()
        try:
            answer = pickle.load(proc.stdout)
        except Exception:  # noqa: BLE001 - the pipe ended (killed, died) or was cut mid-answer
            answer = None
        finally:
            watch.done.set()
        if answer is None:
            self.close()
            raise watch.why(path, proc)
        if isinstance(answer, BaseException):
            if not isinstance(answer, DocumentRejected):  # a reader's own failure: its heap is not to be trusted
                self.close()
            raise answer
        return answer

    def _started(self) -> subprocess.Popen:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self._proc
            self._close_locked()
            try:
                self._proc = subprocess.Popen(reader_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              env={**os.environ, **MALLOC_ENV},
                                              creationflags=getattr(subprocess, "BELOW_NORMAL_PRIORITY_CLASS", 0))
            except OSError as e:
                raise DocumentRejected(f"the document reader process could not start: {e}", "reader_died") from e
            if hasattr(os, "setpriority"):
                try:
                    os.setpriority(os.PRIO_PROCESS, self._proc.pid, READER_NICE)
                except OSError:
                    pass
            return self._proc

    def close(self) -> None:
        """Kill the process (if one runs) and wait for it; the next ``read`` starts another."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class _Watch(threading.Thread):
    """Kills the reader once its read is cancelled or past its time; ``why`` says which, after the fact."""

    def __init__(self, proc: subprocess.Popen, cancel: threading.Event | None, limit: float):
        super().__init__(name="fireside-reader-watch", daemon=True)
        self.proc, self.cancel, self.limit = proc, cancel, limit
        self.done = threading.Event()
        self.ended: str | None = None  # "cancelled" or "overran" when this killed the process
        self._deadline = time.monotonic() + limit

    def run(self) -> None:
        while not self.done.wait(POLL_S):
            if self.cancel is not None and self.cancel.is_set():
                self.ended = "cancelled"
            elif time.monotonic() > self._deadline:
                self.ended = "overran"
            else:
                continue
            self.proc.kill()
            return

    def why(self, path: Path, proc: subprocess.Popen) -> Exception:
        """The error for a read that got no answer: stopped, overran, or the process died."""
        self.join()
        if self.ended == "cancelled" or (self.cancel is not None and self.cancel.is_set()):
            return Cancelled(f"reading {path.name} was stopped")
        if self.ended == "overran":
            return DocumentRejected(f"reading {path.name} took over {self.limit:g} s, so it was stopped; split the "
                                    "file, or save it as plain text and add that", "too_slow", str(path))
        return DocumentRejected(f"reading {path.name} stopped its reader process ({_exit(proc)}); the file may be "
                                "damaged or need more memory than there is", "reader_died", str(path))


def _exit(proc: subprocess.Popen) -> str:
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return "it stopped answering"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


# --- the reader's side ----------------------------------------------------------------------------------
def _listen(stdin, requests: queue.Queue) -> None:
    """Pass on each request; when the pipe closes (the server stopped, or died), end the process at once,
    whatever is being read."""
    try:
        while True:
            requests.put(pickle.load(stdin))
    except Exception:  # noqa: BLE001 - end of stream, or a pipe cut mid-request: either way the caller is gone
        pass
    os._exit(0)


def _answer(path: str):
    try:
        return read_document(path)
    except (DocumentRejected, MemoryError, RecursionError) as exc:
        return exc
    except Exception as exc:  # noqa: BLE001 - a reader's bug fails its file, in words, never the process
        import traceback

        traceback.print_exc()  # onto stderr, which the server's log keeps
        return exc if isinstance(exc, FiresideError) or type(exc).__module__ == "builtins" else \
            RuntimeError(f"{type(exc).__name__}: {exc}")  # the server need not import the library that raised it


def main() -> None:
    """The reader process: answer each path read from stdin with its ``Document`` or its error."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in a terminal is the server's to handle
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing printed by accident can corrupt an answer
    requests: queue.Queue = queue.Queue()
    threading.Thread(target=_listen, args=(sys.stdin.buffer, requests), daemon=True).start()
    while True:
        answer = _answer(requests.get())
        try:
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - an exception that does not pickle is sent in words
            data = pickle.dumps(RuntimeError(f"{type(answer).__name__}: {answer} ({exc})"))
        out.write(data)
        out.flush()


if __name__ == "__main__":
    main()
