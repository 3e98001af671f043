"""The registry of uploaded files and collections: one SQLite file (``registry.sqlite3``) beside the
files themselves and one index per collection. ``uploads.py`` keeps the ``files`` table, ``collections.py``
the ``collections`` and ``members`` tables (its ``indexing.py`` the members' indexing status and ``reading``);
they hold one ``Registry`` and take its lock around each use.

Tables: ``files`` (an uploaded file: its id, name, purpose, size, when), ``collections`` (a named set of
files: its id, name, metadata as JSON, when) and ``members`` (a file in a collection: its indexing status,
the error that failed it, the passages and bytes it holds, the batch that added it), ``reading`` (a member
being indexed now: how many processes began it, so one that keeps stopping the process is given up on);
``watching.py`` keeps ``watched_folders`` (a collection that follows a folder,
when it was last scanned) and ``watched_files`` (each file found there: its upload, or why it was refused,
and the size and modification time it had, which tell a rescan whether it changed). The tables are made if
missing, so an older registry gains them when opened.

Threading: any thread; one lock serializes use of the connection.
"""

from __future__ import annotations

import threading
from pathlib import Path

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    id TEXT PRIMARY KEY, filename TEXT NOT NULL, purpose TEXT NOT NULL, bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL, path TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS collections(
    id TEXT PRIMARY KEY, name TEXT NOT NULL, metadata TEXT NOT NULL DEFAULT '{}', created_at INTEGER NOT NULL,
    last_active_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS members(
    collection_id TEXT NOT NULL REFERENCES collections(id) ON DELETE CASCADE, file_id TEXT NOT NULL,
    status TEXT NOT NULL, error_code TEXT, error_message TEXT, chunks INTEGER NOT NULL DEFAULT 0,
    usage_bytes INTEGER NOT NULL DEFAULT 0, batch_id TEXT, created_at INTEGER NOT NULL,
    PRIMARY KEY(collection_id, file_id));
CREATE INDEX IF NOT EXISTS members_by_file ON members(file_id);
CREATE TABLE IF NOT EXISTS watched_folders(
    collection_id TEXT PRIMARY KEY REFERENCES collections(id) ON DELETE CASCADE, folder TEXT NOT NULL,
    scanned_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS reading(
    collection_id TEXT NOT NULL, file_id TEXT NOT NULL, tries INTEGER NOT NULL,
    PRIMARY KEY(collection_id, file_id));
CREATE TABLE IF NOT EXISTS watched_files(
    collection_id TEXT NOT NULL REFERENCES collections(id) ON DELETE CASCADE, path TEXT NOT NULL, file_id TEXT,
    size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, refused TEXT, PRIMARY KEY(collection_id, path));
"""


class Registry:
    """The open registry database; ``lock`` guards ``db`` (an apsw connection, as the indexes use)."""

    def __init__(self, path: Path):
        import apsw

        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = apsw.Connection(str(path))
        self.db.setbusytimeout(5000)
        self.db.execute("PRAGMA journal_mode=WAL").fetchall()
        self.db.execute("PRAGMA foreign_keys=ON").fetchall()
        self.db.execute(_SCHEMA)
        self.db.execute("INSERT OR IGNORE INTO meta VALUES('schema', ?)", (str(SCHEMA_VERSION),))
        self.lock = threading.RLock()

    def close(self) -> None:
        with self.lock:
            self.db.close()
