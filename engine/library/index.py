"""The library's SQLite index: one row per GGUF file, caching its inspection so listing is instant.

A file is inspected once and again only when its size or modification time changes. The index also
remembers what the disk cannot say: where a file came from (``hub``, ``import``, ``local``), its origin
(the hub repo and revision, or the other app's original path) and the SHA-256 a download verified.
The database runs in WAL mode so the app, the server and a CLI process can read it while one writes.
Each call opens its own short connection: the index is used from several threads.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import LibraryError
from ..models import ModelInfo

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path      TEXT PRIMARY KEY,   -- the file inside a models root (links are not resolved)
    size      INTEGER NOT NULL,
    mtime_ns  INTEGER NOT NULL,
    info      TEXT,               -- ModelInfo as JSON, NULL when inspection failed
    error     TEXT,
    source    TEXT NOT NULL DEFAULT 'local',
    origin    TEXT,
    sha256    TEXT,
    added_at  REAL NOT NULL
);
"""


@dataclass
class IndexRow:
    path: str
    size: int
    mtime_ns: int
    info: ModelInfo | None
    error: str | None
    source: str
    origin: str | None
    sha256: str | None
    added_at: float


def info_to_json(info: ModelInfo) -> str:
    return json.dumps(asdict(info), default=str)


def info_from_json(text: str) -> ModelInfo:
    d = json.loads(text)
    known = ModelInfo.__dataclass_fields__
    return ModelInfo(**{k: v for k, v in d.items() if k in known})


class Index:
    """The index file at ``db_path``; safe to use from several threads and processes."""

    def __init__(self, db_path: Path):
        self.db_path = Path(db_path)
        self.db_path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            _enable_wal(db)
            db.executescript(SCHEMA)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            db = sqlite3.connect(self.db_path, timeout=10)
        except sqlite3.Error as exc:
            raise LibraryError(f"cannot open the library index {self.db_path}: {exc}") from exc
        try:
            with db:
                yield db
        except sqlite3.Error as exc:
            raise LibraryError(f"the library index {self.db_path} failed: {exc}") from exc
        finally:
            db.close()

    def rows(self) -> dict[str, IndexRow]:
        with self._connect() as db:
            cur = db.execute("SELECT path, size, mtime_ns, info, error, source, origin, sha256, added_at "
                             "FROM files")
            out = {}
            for path, size, mtime, info, error, source, origin, sha, added in cur:
                parsed = _parse_info(info)
                out[path] = IndexRow(path, size, mtime, parsed, error, source, origin, sha, added)
            return out

    def put_inspection(self, path: str, size: int, mtime_ns: int, info: ModelInfo | None,
                       error: str | None) -> None:
        """Store a fresh inspection, keeping the row's source and origin."""
        text = info_to_json(info) if info is not None else None
        with self._connect() as db:
            db.execute(
                "INSERT INTO files (path, size, mtime_ns, info, error, added_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(path) DO UPDATE SET size=excluded.size, mtime_ns=excluded.mtime_ns, "
                "info=excluded.info, error=excluded.error",
                (path, size, mtime_ns, text, error, time.time()),
            )

    def put_origin(self, path: str, source: str, origin: str | None, sha256: str | None = None) -> None:
        """Record where a file came from; its inspection is filled in by the next scan."""
        with self._connect() as db:
            db.execute(
                "INSERT INTO files (path, size, mtime_ns, source, origin, sha256, added_at) "
                "VALUES (?, -1, -1, ?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET source=excluded.source, "
                "origin=excluded.origin, sha256=COALESCE(excluded.sha256, files.sha256)",
                (path, source, origin, sha256, time.time()),
            )

    def delete(self, paths: list[str]) -> None:
        with self._connect() as db:
            db.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])


def _enable_wal(db: sqlite3.Connection, wait_s: float = 10.0) -> None:
    """Switch to WAL. The switch needs the file to itself and, unlike other statements, fails at once
    instead of waiting when another connection is opening the same new index (two pulls starting
    together), so it is retried here for as long as ordinary statements would wait."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _parse_info(text: str | None) -> ModelInfo | None:
    if not text:
        return None
    try:
        return info_from_json(text)
    except (ValueError, TypeError):
        return None  # an index written by another version: the next scan re-inspects
