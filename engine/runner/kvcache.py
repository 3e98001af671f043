"""The prompt cache on disk: a slot's KV state saved after a reply, restored for a later prompt that
starts with the same tokens, so a conversation reopened after a restart resumes without evaluating
its history again. This module is the folder and its format, which both sides of the process boundary
use: the runner writes and reads entries (``runner/kvstate.py``), the CLI, the app and the runtime list,
clear and size them, in any process.

Layout: one folder (``Settings.prompt_cache_dir``) holds ``index.sqlite3`` and one ``kv-*.bin`` file
per entry. An entry is one token sequence of one model *identity*: the model file (path, size, mtime
and a hash of its header and last bytes, so another file of the same name never matches), the
options that shape the KV cache (K/V types, flash attention, a slot's context, GPU layers) and the
llama.cpp build (version and system info). A file is ``MAGIC``, the CRC-32 and length of the state,
then the state as ``llama_state_seq_get_data`` wrote it; the CRC is checked before llama.cpp sees a
byte, since llama.cpp accepts a state with a flipped byte without complaint. Several runner processes
may share the folder: sqlite serializes the index.

Threading: every function here runs anywhere, in any process; each opens the index for its own call.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
MAGIC = b"FSKV\x00\x01"
HEADER = struct.Struct("<6sIQ")  # magic, crc32 of the state, its length
INDEX = "index.sqlite3"
SCHEMA_VERSION = 2  # an index of another version is a cache of another Fireside: started afresh
_SCHEMA = """CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY, identity TEXT NOT NULL, n_tokens INTEGER NOT NULL, tokens BLOB NOT NULL,
    file TEXT NOT NULL UNIQUE, size INTEGER NOT NULL, crc INTEGER NOT NULL, tag TEXT, model TEXT,
    created REAL NOT NULL, last_used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS entries_identity ON entries(identity);
CREATE INDEX IF NOT EXISTS entries_tag ON entries(tag);
CREATE TABLE IF NOT EXISTS forgotten (tag TEXT PRIMARY KEY, at REAL NOT NULL);"""
# ``forgotten``: tags cleared (a deleted chat) and when, so a state of theirs still on its way to the
# disk is dropped instead of outliving the chat


@dataclass(frozen=True)
class CacheConfig:
    """What the runtime tells a runner about the cache: where, how big, from how many tokens."""

    folder: str
    cap_bytes: int
    min_tokens: int = 64

    def to_dict(self) -> dict:
        return {"folder": self.folder, "cap_bytes": self.cap_bytes, "min_tokens": self.min_tokens}


@dataclass(frozen=True)
class EntryInfo:
    """One entry as ``fireside cache ls`` shows it."""

    identity: str
    n_tokens: int
    size: int
    tag: str | None
    last_used: float
    file: str
    model: str | None = None  # the model file's name, for people (the identity decides reuse)


@contextlib.contextmanager
def open_index(folder: Path, create: bool = False) -> Iterator[sqlite3.Connection]:
    if not create and not (folder / INDEX).exists():
        raise FileNotFoundError(folder / INDEX)
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(folder / INDEX, timeout=10)
    try:
        if create and db.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            db.executescript(f"DROP TABLE IF EXISTS entries; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};")
            for path in folder.glob("kv-*.bin"):  # their index is gone: nothing can find them again
                path.unlink(missing_ok=True)
        with db:
            yield db
    finally:
        db.close()


# --- the folder, from anywhere (CLI, app, runtime) -------------------------------------------------
def evict(folder: Path, cap_bytes: int) -> int:
    """Delete the least recently used entries until the folder's entries fit in ``cap_bytes``."""
    removed = 0
    with open_index(folder) as db:
        rows = db.execute("SELECT id, file, size FROM entries ORDER BY last_used DESC").fetchall()
        total = 0
        for entry_id, name, size in rows:
            total += size
            if total > cap_bytes:
                db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
                (folder / name).unlink(missing_ok=True)
                removed += 1
    return removed


def entries(folder: Path) -> list[EntryInfo]:
    """Every entry, most recently used first (none when the folder has no index yet)."""
    try:
        with open_index(folder) as db:
            rows = db.execute("SELECT identity, n_tokens, size, tag, last_used, file, model FROM entries"
                              " ORDER BY last_used DESC").fetchall()
    except (FileNotFoundError, sqlite3.Error):
        return []
    return [EntryInfo(*row) for row in rows]


def total_size(folder: Path) -> int:
    """Bytes the cache folder takes on disk (its files, the index included)."""
    try:
        return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    except OSError:
        return 0


def clear(folder: Path, tag: str | None = None) -> int:
    """Delete every entry, or only those saved for ``tag`` (a conversation); returns how many."""
    try:
        with open_index(folder) as db:
            if tag is None:
                rows = db.execute("SELECT id, file FROM entries").fetchall()
            else:
                rows = db.execute("SELECT id, file FROM entries WHERE tag = ?", (tag,)).fetchall()
                now = time.time()
                db.execute("DELETE FROM forgotten WHERE at < ?", (now - 86400,))  # writes take seconds, not days
                db.execute("INSERT OR REPLACE INTO forgotten (tag, at) VALUES (?, ?)", (tag, now))
            db.executemany("DELETE FROM entries WHERE id = ?", [(r[0],) for r in rows])
    except FileNotFoundError:
        return 0
    except sqlite3.DatabaseError:
        if tag is None:  # an unreadable index: clearing still empties the folder
            return remove_all(folder)
        return 0
    for _, name in rows:
        (folder / name).unlink(missing_ok=True)
    if tag is None:  # files an interrupted write or an older index left behind
        for path in folder.glob("*kv-*.bin*"):
            path.unlink(missing_ok=True)
    return len(rows)


def remove_all(folder: Path) -> int:
    """Delete the index and every state file (the cache is lost, nothing else); returns the files removed."""
    n = 0
    for path in [*folder.glob(f"{INDEX}*"), *folder.glob("*kv-*.bin*")]:
        with contextlib.suppress(OSError):
            path.unlink()
            n += path.name.startswith("kv-")
    return n


def remove_stale_temp_files(folder: Path, age_s: float = 3600) -> None:
    """Temp files a crashed writer left (a live writer's are newer than ``age_s``: another process may
    be writing one now)."""
    now = time.time()
    for path in folder.glob(".kv-*.tmp"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > age_s:
                path.unlink()
