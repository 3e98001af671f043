"""Downloads that never lose a byte: stream to ``NAME.part``, resume with Range, verify, then rename.

``Downloader.download(spec)`` writes ``NAME.part`` beside a small JSON sidecar (``NAME.part.json``)
naming what the part is of (repo, file, size, SHA-256), so a cancel, a dropped connection, a crash or
an app restart resumes from the bytes already on disk with ``Range: bytes=N-``. A stall (no bytes for
``stall_timeout`` seconds) or a dropped connection is retried with exponential backoff; a server
that ignores Range (200 instead of 206) is written again from zero rather than appended to. Before the
first byte the free disk space is checked (``DiskFull``; nothing is written). The SHA-256 is computed
as the bytes arrive (the existing part is hashed first on a resume) and compared with the hub's LFS
hash; only a verified file is renamed, atomically, into the library. A mismatch deletes the part and
raises ``IntegrityError``. Progress goes to ``on_progress`` about ten times a second; ``cancel`` (a
``threading.Event``) stops the download within a fraction of a second, even while the server sends
nothing, and keeps the part for a later resume (that is "pause"). The speed shown counts only bytes
transferred in this session, never the ones resumed from disk. The part is only ever opened as a
regular file, without blocking and without following a link (``_open_part``): a FIFO planted at
``NAME.part`` is a clear ``DownloadError``, not a pull that hangs.

Threading: ``download`` blocks; call it from a worker thread, one per download (several may run at
once: each writes only its own part file). Two pulls of one file, in one process or two, never write
the same part: the second waits on the part's lock (``partlock.PartLock``) and then finds it done.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO

import httpx

from ..errors import DiskFull, DownloadCancelled, DownloadError, GatedRepo, HubError, IntegrityError
from ..fsutil import atomic_write, fsync_dir
from ..models import kind
from .partlock import PartLock

log = logging.getLogger(__name__)

DISK_MARGIN = 64 * 1024 * 1024  # leave the disk with room for the index, logs and the OS
_PART_FLAGS = (getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_BINARY", 0))


@dataclass(frozen=True)
class DownloadSpec:
    """One file to fetch: where from, how big, what hash, and where it goes."""

    repo_id: str
    filename: str
    url: str
    dest: Path
    size: int
    sha256: str | None = None
    revision: str = "main"


@dataclass(frozen=True)
class Progress:
    filename: str
    done: int
    total: int
    speed: float  # bytes per second, smoothed
    eta_s: float | None
    state: str  # "downloading", "retrying", "verifying", "done"


def free_space(path: Path) -> int:
    """Free bytes on the file system that holds ``path`` (or its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


class _Meter:
    """Samples progress: at most one callback per ``interval`` seconds, plus state changes."""

    def __init__(self, spec: DownloadSpec, on_progress: Callable[[Progress], None] | None,
                 clock: Callable[[], float], interval: float = 0.1, start: int = 0):
        self.spec, self.on_progress, self.clock, self.interval = spec, on_progress, clock, interval
        self.last_t = clock()
        self.last_done = start  # bytes resumed from disk were not transferred now: never count them
        self.speed = 0.0

    def update(self, done: int, state: str = "downloading", force: bool = False) -> None:
        now = self.clock()
        dt = now - self.last_t
        if not force and dt < self.interval:
            return
        if dt > 0 and done >= self.last_done:  # a restart from zero just moves the baseline
            rate = (done - self.last_done) / dt
            self.speed = rate if self.speed == 0 else 0.7 * self.speed + 0.3 * rate
        self.last_t, self.last_done = now, done
        left = self.spec.size - done
        eta = left / self.speed if self.speed > 0 else None
        if self.on_progress:
            self.on_progress(Progress(self.spec.filename, done, self.spec.size, self.speed, eta, state))


class _State:
    """The bytes in the part file so far and their running hash (exact even after an exception)."""

    def __init__(self, hasher: hashlib._Hash, done: int):
        self.hasher, self.done = hasher, done

    def add(self, chunk: bytes) -> None:
        self.hasher.update(chunk)
        self.done += len(chunk)

    def reset(self) -> None:
        self.hasher, self.done = hashlib.sha256(), 0


class _Restart(Exception):
    """The part on disk cannot be continued; start again from zero."""


class Downloader:
    """Fetches hub files into the models folder. ``client`` is the I/O seam (a local server in tests)."""

    def __init__(self, client: httpx.Client | None = None, *, auth: httpx.Auth | None = None,
                 stall_timeout: float = 30.0, retries: int = 6, backoff: float = 1.0,
                 free_space: Callable[[Path], int] = free_space, clock: Callable[[], float] = time.monotonic):
        self.client = client or httpx.Client(follow_redirects=True, timeout=httpx.Timeout(
            stall_timeout, connect=15.0))
        self.auth = auth
        self.stall_timeout, self.retries, self.backoff = stall_timeout, retries, backoff
        self.free_space, self.clock = free_space, clock

    def check_space(self, specs: list[DownloadSpec]) -> None:
        """Refuse (``DiskFull``) before anything is written when the files would not fit."""
        if not specs:
            return
        need = sum(max(0, s.size - _part_size(s)) for s in specs)
        free = self.free_space(specs[0].dest.parent)
        if need + DISK_MARGIN > free:
            raise DiskFull(f"not enough free disk space for {specs[0].filename}: it needs "
                           f"{need / 2**30:.2f} GiB (plus {DISK_MARGIN // 2**20} MiB to spare) and "
                           f"{free / 2**30:.2f} GiB is free in {specs[0].dest.parent}")

    def download(self, spec: DownloadSpec, on_progress: Callable[[Progress], None] | None = None,
                 cancel: threading.Event | None = None) -> Path:
        """Fetch ``spec`` to ``spec.dest`` and return it, verified. Blocks; run on a worker thread.
        A second pull of the same file (another thread or process) waits for the first, then finds
        the file in place; the wait reports the state ``waiting`` and stops on ``cancel``."""
        cancel = cancel or threading.Event()
        if _complete(spec):
            return spec.dest
        self.check_space([spec])
        lock = PartLock(_lock_path(spec))
        lock.acquire(cancel, on_wait=lambda: on_progress and on_progress(
            Progress(spec.filename, 0, spec.size, 0.0, None, "waiting")))
        try:
            if _complete(spec):  # the pull we waited for has finished it
                return spec.dest
            return self._download_locked(spec, on_progress, cancel)
        finally:
            lock.release()

    def _download_locked(self, spec: DownloadSpec, on_progress: Callable[[Progress], None] | None,
                         cancel: threading.Event) -> Path:
        part, sidecar = _part_path(spec), _sidecar_path(spec)
        part.parent.mkdir(parents=True, exist_ok=True)
        if not _sidecar_matches(spec):
            part.unlink(missing_ok=True)
            atomic_write(sidecar, json.dumps(_sidecar(spec)))
        _open_part(part, "r+b", create=True).close()  # only a regular file of ours, never a FIFO left there
        state = _State(*_hash_file(part))
        meter = _Meter(spec, on_progress, self.clock, start=state.done)  # speed counts this session's bytes
        try:
            self._fetch_all(spec, part, state, meter, cancel)
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFull(f"{spec.filename}: the disk filled up at {state.done:,} bytes; free some "
                               f"space and pull again to resume") from exc
            raise DownloadError(f"{spec.filename}: cannot write {part}: {exc.strerror or exc}") from exc
        meter.update(state.done, "verifying", force=True)
        self._verify(spec, part, state)
        with _open_part(part, "r+b") as fh:  # the bytes reach the disk before the name does (r+: Windows)
            os.fsync(fh.fileno())
        os.replace(part, spec.dest)
        fsync_dir(spec.dest.parent)
        sidecar.unlink(missing_ok=True)
        meter.update(state.done, "done", force=True)
        return spec.dest

    def _fetch_all(self, spec: DownloadSpec, part: Path, state: _State, meter: _Meter,
                   cancel: threading.Event) -> None:
        failures = 0
        while state.done < spec.size:
            before = state.done
            try:
                self._fetch(spec, part, state, meter, cancel)
            except _Restart:
                state.reset()
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError, _Retry) as exc:
                if cancel.is_set():  # the hang-up on cancel ends the read with a network error
                    raise DownloadCancelled(f"{spec.filename}: cancelled at {state.done:,} bytes; "
                                            f"run again to resume") from None
                failures = 1 if state.done > before else failures + 1
                if failures > self.retries:
                    raise DownloadError(f"{spec.filename}: the download keeps failing ({exc}); run it "
                                        f"again to resume from {state.done:,} bytes") from exc
                delay = min(30.0, self.backoff * 2 ** (failures - 1))
                log.info("%s: %s; retrying in %.2fs from byte %d", spec.filename, exc, delay, state.done)
                meter.update(state.done, "retrying", force=True)
                if cancel.wait(delay):
                    raise DownloadCancelled(f"{spec.filename}: cancelled; run again to resume") from None

    def _fetch(self, spec: DownloadSpec, part: Path, state: _State, meter: _Meter,
               cancel: threading.Event) -> None:
        headers = {"Range": f"bytes={state.done}-"} if state.done else {}
        auth = self.auth or httpx.USE_CLIENT_DEFAULT
        with self.client.stream("GET", spec.url, headers=headers, auth=auth) as r:
            _check_status(r, spec, state.done)
            if r.status_code == 200 and state.done:
                log.info("%s: the server ignored Range; writing the file again from zero", spec.filename)
                state.reset()
            with _open_part(part, "r+b") as fh, _HangUpOnCancel(r, cancel):
                fh.seek(state.done)
                fh.truncate()
                for chunk in r.iter_bytes():  # as received: a drop loses no buffered bytes
                    if cancel.is_set():
                        raise DownloadCancelled(f"{spec.filename}: cancelled at {state.done:,} bytes; "
                                                f"run again to resume")
                    fh.write(chunk)
                    fh.flush()  # on disk before the next read, which may stall: a kill loses nothing
                    state.add(chunk)
                    if state.done > spec.size:
                        raise _Restart()
                    meter.update(state.done)

    def _verify(self, spec: DownloadSpec, part: Path, state: _State) -> None:
        digest, done = state.hasher.hexdigest(), state.done
        if done == spec.size and (spec.sha256 is None or digest == spec.sha256.lower()):
            return
        part.unlink(missing_ok=True)
        _sidecar_path(spec).unlink(missing_ok=True)
        raise IntegrityError(f"{spec.filename} is corrupt: its SHA-256 is {digest} but the hub published "
                             f"{spec.sha256} ({done:,} of {spec.size:,} bytes); it was not added to the "
                             f"library. Pull it again to download it afresh.")


class _Retry(Exception):
    """A server error worth retrying (5xx, 429)."""


def _check_status(r: httpx.Response, spec: DownloadSpec, done: int) -> None:
    code = r.status_code
    if code == 206 and not r.headers.get("content-range", "").startswith(f"bytes {done}-"):
        raise _Restart()
    if code in (200, 206):
        return
    if code == 416:
        raise _Restart()
    if code == 429 or code >= 500:
        raise _Retry(f"the server answered {code}")
    r.read()
    raise_for_hub_status(r, f"{spec.repo_id}/{spec.filename}", spec.repo_id)


def raise_for_hub_status(r: httpx.Response, what: str, repo_id: str | None = None) -> None:
    """Turn a hub error answer into Fireside's error: gated, private, missing, or other."""
    code = r.status_code
    if code in (401, 403):
        if "gated" in (r.headers.get("x-error-code", "") + r.text[:2000]).lower():
            raise GatedRepo(gated_message(repo_id or what))
        raise HubError(f"{what}: the hub refused access ({code}); the repo may be private, or your token "
                       f"may have expired (`fireside login` saves a new one)")
    if code == 404:
        raise DownloadError(f"no such repo or file on the hub: {what}")
    raise HubError(f"{what}: the hub answered {code}")


def gated_message(repo_id: str) -> str:
    return (f"{repo_id} is gated: open its page on the hub, sign in and accept its terms, then save an "
            f"access token with `fireside login` (create one at Settings > Access Tokens on the hub)")


class _HangUpOnCancel:
    """While a body streams, wakes a read blocked on a silent server as soon as ``cancel`` is set: it
    shuts the socket down, so the read ends at once instead of after the stall timeout (30 s)."""

    def __init__(self, response: httpx.Response, cancel: threading.Event, poll_s: float = 0.2):
        stream = response.extensions.get("network_stream")
        self.sock = stream.get_extra_info("socket") if stream is not None else None
        self.cancel, self.poll_s, self.done = cancel, poll_s, threading.Event()

    def __enter__(self) -> _HangUpOnCancel:
        if self.sock is not None:
            threading.Thread(target=self._watch, name="fireside-download-cancel", daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()

    def _watch(self) -> None:
        while not self.done.is_set():
            if self.cancel.wait(self.poll_s) and not self.done.is_set():
                try:
                    self.sock.shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed: the read has ended anyway
                    pass
                return


def _complete(spec: DownloadSpec) -> bool:
    return spec.dest.is_file() and spec.dest.stat().st_size == spec.size


def _lock_path(spec: DownloadSpec) -> Path:
    return spec.dest.with_name(spec.dest.name + ".part.lock")


def _part_path(spec: DownloadSpec) -> Path:
    return spec.dest.with_name(spec.dest.name + ".part")


def _sidecar_path(spec: DownloadSpec) -> Path:
    return spec.dest.with_name(spec.dest.name + ".part.json")


def _sidecar(spec: DownloadSpec) -> dict[str, object]:
    d = asdict(spec)
    d.pop("dest")
    d.pop("url")  # signed CDN URLs change; what the part is of does not
    return d


def _sidecar_matches(spec: DownloadSpec) -> bool:
    try:
        return json.loads(_sidecar_path(spec).read_text(encoding="utf-8")) == _sidecar(spec)
    except (OSError, ValueError):
        return False


def _part_size(spec: DownloadSpec) -> int:
    part = _part_path(spec)
    return part.stat().st_size if part.is_file() and _sidecar_matches(spec) else 0


def _open_part(path: Path, mode: str, create: bool = False) -> BinaryIO:
    """``NAME.part`` opened as model files are (``models/files.py``): a regular file only, opened without
    blocking and without following a link, so a FIFO, a device or a link planted at that name is a
    clear ``DownloadError`` instead of a pull that hangs (or writes where the link points)."""
    flags = (os.O_RDONLY if mode == "rb" else os.O_RDWR) | _PART_FLAGS | (os.O_CREAT if create else 0)
    try:
        mode_now = os.lstat(path).st_mode
    except FileNotFoundError:
        mode_now = stat.S_IFREG if create else 0
    if not stat.S_ISREG(mode_now):  # checked before opening: a device is never even opened
        raise _not_a_part(path, mode_now)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link swapped in since the check
            raise _not_a_part(path, stat.S_IFLNK) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced after the first check
            raise _not_a_part(path, st.st_mode)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def _not_a_part(path: Path, mode: int) -> DownloadError:
    what = "a symbolic link" if stat.S_ISLNK(mode) else kind(mode)
    return DownloadError(f"{path.name} is {what}, not a regular file, so Fireside will not write the download "
                         f"there; remove it ({path}) and pull again")


def _hash_file(path: Path) -> tuple[hashlib._Hash, int]:
    hasher, n = hashlib.sha256(), 0
    with _open_part(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            hasher.update(chunk)
            n += len(chunk)
    return hasher, n
