"""The runner's part of the prompt cache (``runner/kvcache.py`` is the folder and its format): a
slot's KV state looked up and restored before a prompt is evaluated, and saved after a reply.

The runner (``batch.py``) takes a snapshot of a slot when a reply ends (a memcpy on the worker
thread) and hands it to ``PromptCache.save``; a writer thread of its own writes the file (temp file,
fsync, rename), updates the index, drops entries the new one covers (the same conversation a turn
earlier) and evicts the least recently used beyond the size cap. It writes only once the runner has
had nothing to decode for ``WRITE_QUIET_S`` (``decoding``): on a 2-core machine, writing a 2 MiB state
(about 3 ms of CPU) during a batched step took that time from every stream being decoded (measured: 4
streams at 0.97x of llama-server's speed with the cache on, 0.99x with it off), and a write started as
a reply ended ran while the conversation's next turn was being read, rendered and tokenized (a next
turn's first token 5 ms later, bench/vision.py: an agent's or a script's next request comes within
milliseconds). A write goes on ``WRITE_CHUNK`` at a time (its checksum too) and stops between
chunks while the runner decodes: a long chat's state is large (an 8k-token f16 lane state of the
starter, 190 MB), and one written while the next turn decoded took that turn from 34.5 to 31 tok/s (the
writer's memory traffic beside decoding, whatever its priority). Snapshots wait in memory meanwhile,
``PENDING`` at most: a conversation's newer state takes the place of its older one (it holds the older turn too), and with that many other
conversations' waiting no snapshot is taken (a reply's state then stays only in its slot), so a busy
runner spends nothing on the cache. A write that fails (a full disk, a
read-only folder) turns saving off for the runner's life with one logged notice; a reply never fails
or waits for it.

The index of this identity's entries is kept in memory (``_Index``): a lookup scans it, and every
write of this runner goes to the disk and to it. Other processes (another runner, ``fireside cache
clear``) change the file too, so a lookup first reads sqlite's file change counter (4 bytes of the
file's header, bumped by every committed write) and reads the index again only when a write it did
not make has happened. Before, every admission opened the index and read every entry's tokens.

Threading: ``lookup`` and ``read`` run on the runner's worker thread, the writer on its own; the
in-memory index has a lock of its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import json
import os
import sqlite3
import struct
import sys
import threading
import time
import zlib
from array import array
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write
from .kvcache import (
    HEADER,
    INDEX,
    MAGIC,
    CacheConfig,
    evict,
    open_index,
    remove_all,
    remove_stale_temp_files,
)
from .threads import yield_cpu

WRITE_QUIET_S = 0.3  # the runner decodes nothing this long before the writer writes
PENDING = 2  # snapshots waiting to be written, at most
WRITE_CHUNK = 4 << 20  # a write (and its checksum) goes on this much at a time, waiting between while the runner decodes
_HASHED = 1 << 20  # bytes hashed at each end of the model file: its header, and its last tensors
# llama() options that change what a KV state means or how it was computed; the rest (threads, batch
# size, mmap, slot count: each slot has a stream of its own) leave a saved state valid
_SHAPING = ("n_ctx", "n_gpu_layers", "main_gpu", "tensor_split", "flash_attn", "type_k", "type_v",
            "use_extra_bufts", "tiled_mm", "embedding", "pooling_type", "rope_freq_base", "rope_freq_scale", "mmproj", "devices")


@dataclass(frozen=True)
class Entry:
    id: int
    tokens: list[int]
    file: str
    size: int
    crc: int


def identity(path: str, kwargs: dict, n_ctx_seq: int) -> str:
    """The key every entry of this loaded model carries: a state is only ever used by the same
    model file, loaded the same way, by the same llama.cpp build."""
    import llama_cpp

    st = os.stat(path)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        digest.update(fh.read(_HASHED))
        fh.seek(max(0, st.st_size - _HASHED))
        digest.update(fh.read(_HASHED))
    parts = {
        "path": str(Path(path).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "content": digest.hexdigest(), "n_ctx_seq": n_ctx_seq,
        "options": {k: kwargs.get(k) for k in _SHAPING if k in kwargs},
        "llama_cpp": getattr(llama_cpp, "__version__", ""),
        "system": llama_cpp.llama_print_system_info().decode("utf-8", "replace"),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _token_bytes(tokens: list[int]) -> bytes:
    return array("i", tokens).tobytes()


def _common_bytes(a: bytes, b: bytes) -> int:
    """Length of the common prefix of ``a`` and ``b``, by bisection over slice compares (memcmp)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _change_counter(path: Path) -> tuple[int, int] | None:
    """The index file's identity and sqlite's file change counter (offset 24 of its header, bumped by
    each committed write in rollback-journal mode); None when there is no file."""
    try:
        with path.open("rb") as fh:
            fh.seek(24)
            head = fh.read(4)
            return os.fstat(fh.fileno()).st_ino, int.from_bytes(head, "big") if len(head) == 4 else -1
    except OSError:
        return None


class _Index:
    """This identity's entries, in memory, with the change counter they were read at."""

    def __init__(self, folder: Path, ident: str):
        self.path, self.identity = folder / INDEX, ident
        self.rows: dict[int, tuple[bytes, str, int, int]] = {}  # id: (tokens, file, size, crc)
        self.version: tuple[int, int] | None | bool = False  # False: never read
        self.lock = threading.Lock()

    def current(self) -> dict[int, tuple[bytes, str, int, int]]:
        """The entries, read again only when another process has written the index since."""
        with self.lock:
            if self.version is False or _change_counter(self.path) != self.version:
                self._load()
            return self.rows

    def _load(self) -> None:
        for _ in range(3):  # a write between the counter and the rows: read again
            before = _change_counter(self.path)
            try:
                with open_index(self.path.parent) as db:
                    rows = db.execute("SELECT id, tokens, file, size, crc FROM entries WHERE identity = ?",
                                      (self.identity,)).fetchall()
            except (OSError, sqlite3.Error):
                rows, before = [], None  # no index (never saved, cleared, unreadable): no entries
            if before == _change_counter(self.path):
                break
        self.rows, self.version = {r[0]: tuple(r[1:]) for r in rows}, before

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One transaction of this runner's: the caller changes ``rows`` to match; when another process
        wrote in between (the counter moved by more than this write), the next lookup reads the file."""
        with self.lock:
            before = _change_counter(self.path)
            with open_index(self.path.parent) as db:
                yield db
            after = _change_counter(self.path)
            if before != self.version or before is None or after is None or after[0] != before[0] \
                    or after[1] - before[1] > 1:
                self.version = False

    def reload(self) -> None:
        with self.lock:
            self._load()


class PromptCache:
    """One runner's view of the cache folder, for one model identity."""

    def __init__(self, config: CacheConfig, ident: str, model: str = ""):
        self.folder, self.cap, self.min_tokens = Path(config.folder), config.cap_bytes, config.min_tokens
        self.identity, self.model = ident, model
        self._index = _Index(self.folder, ident)
        self.saving = True
        self.notice = ""  # why saving is off, once it is
        self._pending: deque[tuple] = deque()  # snapshots waiting: (tokens, state, tag, taken at)
        self._busy, self._quiet_since, self._closing = False, time.monotonic(), False
        self._cond = threading.Condition()  # guards the four above; the writer waits on it
        try:
            self._openopen_index()
        except (OSError, sqlite3.Error) as exc:
            self._stop_saving(f"the prompt cache folder {self.folder} cannot be written ({exc})")
        self._writer = threading.Thread(target=self._write_loop, name="fireside-kvcache-writer", daemon=True)
        self._writer.start()

    def _openopen_index(self) -> None:
        """Create the index if need be; a corrupted one is a lost cache, started afresh."""
        try:
            with open_index(self.folder, create=True):
                pass
        except sqlite3.DatabaseError as exc:
            if type(exc) is not sqlite3.DatabaseError:  # locked, read-only, full: not the file's fault
                raise
            print(f"fireside: the prompt cache index was unreadable ({exc}); starting it afresh",
                  file=sys.stderr, flush=True)
            remove_all(self.folder)
            with open_index(self.folder, create=True):
                pass
        remove_stale_temp_files(self.folder)

    # --- worker thread -------------------------------------------------------------------------
    def lookup(self, prompt: list[int]) -> tuple[Entry, int] | None:
        """The entry sharing the longest prefix with ``prompt``, and that prefix's length in tokens."""
        want = _token_bytes(prompt)
        best, best_n = None, 0
        for entry_id, row in list(self._index.current().items()):
            n = _common_bytes(row[0], want) // 4
            if n > best_n:
                best, best_n = (entry_id, *row), n
        if best is None:
            return None
        tokens = array("i")
        tokens.frombytes(best[1])
        return Entry(best[0], tokens.tolist(), best[2], best[3], best[4]), best_n

    def read(self, entry: Entry) -> Any:
        """The entry's state, checked; a missing, truncated or corrupted file is deleted and None returned."""
        path = self.folder / entry.file
        try:
            with path.open("rb") as fh:
                magic, crc, size = HEADER.unpack(fh.read(HEADER.size))
                if size + HEADER.size != entry.size:
                    raise struct.error("its length does not match the index")
                data = _buffer(size)
                got = fh.readinto(data)
        except FileNotFoundError:
            self.forget(entry, delete_file=False)
            return None
        except (OSError, struct.error) as exc:
            self._refuse(entry, f"unreadable ({exc})")
            return None
        if magic != MAGIC or got != size or size + HEADER.size != entry.size or crc != entry.crc \
                or zlib.crc32(data) != crc:
            self._refuse(entry, "its checksum does not match (a truncated or corrupted file)")
            return None
        self._touch(entry.id)
        return data

    def _refuse(self, entry: Entry, why: str) -> None:
        print(f"fireside: prompt cache entry {entry.file} refused: {why}; the prompt is evaluated instead",
              file=sys.stderr, flush=True)
        self.forget(entry)

    def forget(self, entry: Entry, delete_file: bool = True) -> None:
        try:
            if delete_file:
                (self.folder / entry.file).unlink(missing_ok=True)
            with self._index.write() as db:
                db.execute("DELETE FROM entries WHERE id = ?", (entry.id,))
                self._index.rows.pop(entry.id, None)
        except (OSError, sqlite3.Error):
            pass  # a read-only folder: the entry stays refused by its checksum next time too

    def _touch(self, entry_id: int) -> None:
        with contextlib.suppress(OSError, sqlite3.Error), self._index.write() as db:
            db.execute("UPDATE entries SET last_used = ? WHERE id = ?", (time.time(), entry_id))

    def wants(self, tokens: list[int]) -> bool:
        """Whether a state of ``tokens`` would be saved now (so a snapshot is worth taking)."""
        with self._cond:
            return self._kept(tokens) is not None

    def save(self, tokens: list[int], state: Any, tag: str | None = None) -> bool:
        """Queue a snapshot (``state``: a buffer ``llama_state_seq_get_data`` filled) to be written, in
        place of a waiting one it extends. Never blocks; returns whether it was queued."""
        with self._cond:
            kept = self._kept(tokens)
            if kept is None:
                return False
            self._pending = deque([*kept, (list(tokens), state, tag, time.time())])
            self._cond.notify()
        return True

    def _kept(self, tokens: list[int]) -> list[tuple] | None:
        """The waiting snapshots a state of ``tokens`` would leave (not those it extends), or None when
        it would not be saved. Called under ``_cond``."""
        if not self.saving or len(tokens) < self.min_tokens:
            return None
        kept = [p for p in self._pending if not _extends(tokens, p[0])]
        return kept if len(kept) < PENDING else None

    def decoding(self, busy: bool) -> None:
        """The runner says whether it is decoding: waiting writes wait until it has been quiet a while."""
        if busy != self._busy:
            with self._cond:
                self._busy = busy
                if not busy:
                    self._quiet_since = time.monotonic()
                    self._cond.notify()

    def close(self, timeout: float = 10.0) -> None:
        """Let waiting writes finish (up to ``timeout``), then stop the writer."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._writer.join(timeout)

    # --- writer thread -------------------------------------------------------------------------
    def _write_loop(self) -> None:
        yield_cpu()  # the decode threads and the server, in another process, come first
        while (item := self._next()) is not None:
            if not self.saving:
                continue
            try:
                self._write(*item)
            except (OSError, sqlite3.Error) as exc:
                self._stop_saving(f"the prompt cache could not be written ({exc})")
            except Exception as exc:  # a bug here must not take the runner down with it
                self._stop_saving(f"the prompt cache failed ({type(exc).__name__}: {exc})")

    def _next(self) -> tuple | None:
        """The oldest waiting snapshot once the runner has been quiet ``WRITE_QUIET_S`` (at once when
        closing); None when closed with nothing left."""
        with self._cond:
            while not self._pending and not self._closing:
                self._cond.wait()
        self._quiet()
        with self._cond:
            return self._pending.popleft() if self._pending else None

    def _quiet(self) -> None:
        """Wait until the runner has decoded nothing for ``WRITE_QUIET_S`` (not at all when closing)."""
        with self._cond:
            while not self._closing:
                wait = None if self._busy else self._quiet_since + WRITE_QUIET_S - time.monotonic()
                if wait is not None and wait <= 0:
                    return
                self._cond.wait(wait)

    def _paced(self, data: memoryview) -> Iterator[memoryview]:
        """``data`` a ``WRITE_CHUNK`` at a time, each once the runner is quiet."""
        for at in range(0, len(data), WRITE_CHUNK):
            self._quiet()
            yield data[at:at + WRITE_CHUNK]

    def _write(self, tokens: list[int], state: Any, tag: str | None, taken_at: float) -> None:
        raw = _token_bytes(tokens)
        data = memoryview(state).cast("B")
        size = HEADER.size + len(data)
        if size > self.cap:
            return
        with open_index(self.folder) as db:  # tags are not kept in memory: the writer reads them here
            rows = db.execute("SELECT id, tokens, file, tag FROM entries WHERE identity = ?",
                              (self.identity,)).fetchall()
        covered = [r for r in rows if len(r[1]) <= len(raw) and raw.startswith(r[1])]
        tag = tag or next((r[3] for r in covered if r[3]), None)  # a turn saved without a tag keeps its chat's
        if any(len(r[1]) >= len(raw) and r[1].startswith(raw) for r in rows):
            return  # this sequence (or a longer one starting with it) is saved already
        name = f"kv-{hashlib.sha256(self.identity.encode() + raw).hexdigest()[:32]}.bin"
        crc = 0
        for chunk in self._paced(data):
            crc = zlib.crc32(chunk, crc)
        atomic_write(self.folder / name, itertools.chain([HEADER.pack(MAGIC, crc, len(data))], self._paced(data)))
        now = time.time()
        with open_index(self.folder) as db:
            forgotten = db.execute("SELECT at FROM forgotten WHERE tag = ?", (tag,)).fetchone() if tag else None
            if forgotten and forgotten[0] >= taken_at:  # its chat was deleted while this was being written
                (self.folder / name).unlink(missing_ok=True)
                return
            db.execute("INSERT OR REPLACE INTO entries (identity, n_tokens, tokens, file, size, crc, tag, model,"
                       " created, last_used) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (self.identity, len(tokens), raw, name, size, crc, tag, self.model, now, now))
            for row in covered:  # the same conversation a turn earlier: the new entry serves its prompts too
                if row[2] != name:
                    db.execute("DELETE FROM entries WHERE id = ?", (row[0],))
        for row in covered:
            if row[2] != name:
                (self.folder / row[2]).unlink(missing_ok=True)
        evict(self.folder, self.cap)
        self._index.reload()  # here, on the writer thread, so the worker's next lookup finds it current

    def _stop_saving(self, why: str) -> None:
        if self.saving:
            self.saving, self.notice = False, f"{why}; prompt cache saving is off until the model is loaded again"
            print(f"fireside: {self.notice}", file=sys.stderr, flush=True)  # the runner's log


def _extends(tokens: list[int], older: list[int]) -> bool:
    """Whether ``tokens`` continue ``older`` (the same conversation, a turn or more on)."""
    return len(older) <= len(tokens) and tokens[:len(older)] == older


def snapshot(ctx: Any, seq_id: int) -> Any:
    """A copy of sequence ``seq_id``'s KV state (a memcpy: cheap enough for the worker thread). The
    buffer is numpy's uninitialized one: a ctypes array would first be zero-filled, touching every
    page twice (measured: 90 MiB of state in about 75 ms that way)."""
    import llama_cpp as lc

    size = lc.llama_state_seq_get_size(ctx, seq_id)
    buf = _buffer(size)
    written = lc.llama_state_seq_get_data(ctx, buf.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size, seq_id)
    return buf if written == size else None


def _buffer(size: int) -> Any:
    """``size`` writable bytes, not zero-filled first (every byte is written next)."""
    import numpy as np  # a dependency of llama-cpp-python

    return np.empty(size, dtype=np.uint8)


def restore(ctx: Any, seq_id: int, data: Any) -> bool:
    """Load a checked state into sequence ``seq_id``; False if llama.cpp refused it."""
    import llama_cpp as lc

    buf = (ctypes.c_uint8 * len(data)).from_buffer(data)
    return lc.llama_state_seq_set_data(ctx, buf, len(data), seq_id) == len(data)
