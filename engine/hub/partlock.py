"""One download of a file at a time, across threads and processes: a lock on ``NAME.part.lock``.

Two pulls of the same file (two Discover clicks, the app and ``fireside pull``, two terminals) would
otherwise both append to one ``NAME.part``, and the first to finish renames it away under the other.
``PartLock`` takes an exclusive ``flock`` (``msvcrt.locking`` on Windows) on a lock file beside the
part; the second pull waits for it, cancellably, and then finds the file already in place. ``flock``
locks belong to an open file, so two threads of one process exclude each other as two processes do,
and the OS drops the lock when a process dies, so a SIGKILLed pull never leaves a stale lock.

The holder deletes the lock file before unlocking it; a waiter that then gets the lock on the deleted
file sees that the path now names another file (or none) and starts over, so no two pulls ever both
hold "the" lock.

Threading: one ``PartLock`` per pull; ``acquire`` blocks (polling ``cancel``), ``release`` does not.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import DownloadCancelled

if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class PartLock:
    """The exclusive right to write one file's ``.part``. Use ``acquire``/``release`` or ``with``."""

    def __init__(self, path: Path, poll_s: float = 0.1):
        self.path, self.poll_s = Path(path), poll_s
        self._fd: int | None = None

    def acquire(self, cancel: threading.Event | None = None, on_wait: Callable[[], None] | None = None) -> None:
        """Take the lock, waiting while another pull holds it; ``DownloadCancelled`` if ``cancel`` is set
        while waiting. ``on_wait`` is called once, when the lock turns out to be taken."""
        cancel = cancel or threading.Event()
        waited = False
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            while not _try_lock(fd):
                if not waited and on_wait:
                    on_wait()
                waited = True
                if cancel.wait(self.poll_s):
                    os.close(fd)
                    raise DownloadCancelled(f"{self.path.name[:-len('.part.lock')]}: cancelled while "
                                            f"another pull of the same file was running")
            if self._still_named(fd):
                self._fd = fd
                return
            _unlock(fd)  # we locked a file its holder had already deleted: try the current one
            os.close(fd)

    def _still_named(self, fd: int) -> bool:
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still held: see the module docstring
        except OSError:  # Windows cannot delete an open file; the empty lock file stays, harmlessly
            pass
        _unlock(fd)
        os.close(fd)

    def __enter__(self) -> PartLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
