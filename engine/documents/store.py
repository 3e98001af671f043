"""The index's SQLite file: the schema, opening it with sqlite-vec loaded, and the small reads and writes
the index makes. apsw is the driver, not the standard ``sqlite3``: it carries its own SQLite (with FTS5)
and can always load an extension, where many Python builds' ``sqlite3`` cannot (pyenv's and macOS's
system Python lack ``enable_load_extension``), and sqlite-vec is a loadable extension.

Tables: ``files`` (one row a file: its path, size, mtime and hash when indexed), ``chunks`` (the
passages and where they lie), ``chunks_fts`` (FTS5 over heading and text, rowid = the chunk's id),
``chunk_vectors`` (a sqlite-vec ``vec0`` table, rowid = the chunk's id, created once the embedder's
width is known) and ``meta`` (the schema version, the embedder's name and width).

Threading: one ``Store`` is used by one thread at a time; ``DocumentIndex`` holds a lock around it.
"""

from __future__ import annotations

from array import array
from pathlib import Path

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files(
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, pages INTEGER, title TEXT NOT NULL DEFAULT '',
    indexed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS chunks(
    id INTEGER PRIMARY KEY, file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL, heading TEXT NOT NULL, text TEXT NOT NULL, page INTEGER, page_end INTEGER,
    digest TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks(file_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(heading, body, tokenize='porter unicode61');
"""


def open_db(path: Path | str):
    import apsw
    import sqlite_vec

    db = apsw.Connection(str(path))
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    db.enable_load_extension(False)
    db.setbusytimeout(5000)
    db.execute("PRAGMA journal_mode=WAL").fetchall()  # apsw runs a statement that returns rows only as it is read
    db.execute("PRAGMA foreign_keys=ON").fetchall()
    db.execute(_SCHEMA)
    db.execute("INSERT OR IGNORE INTO meta VALUES('schema', ?)", (str(SCHEMA_VERSION),))
    return db


def meta(db, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return row[0] if row else None


def set_meta(db, key: str, value: str | None) -> None:
    if value is None:
        db.execute("DELETE FROM meta WHERE key = ?", (key,))
    else:
        db.execute("INSERT OR REPLACE INTO meta VALUES(?, ?)", (key, value))


def vectors_ready(db) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchone() is not None


def create_vectors(db, width: int) -> None:
    db.execute(f"CREATE VIRTUAL TABLE chunk_vectors USING vec0(embedding float[{int(width)}] distance_metric=cosine)")


def drop_vectors(db) -> None:
    db.execute("DROP TABLE IF EXISTS chunk_vectors")


def packed(vector) -> bytes:
    return array("f", vector).tobytes()


def delete_file(db, file_id: int) -> None:
    ids = [r[0] for r in db.execute("SELECT id FROM chunks WHERE file_id = ?", (file_id,))]
    if ids:
        marks = ",".join("?" * len(ids))
        db.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", ids)
        if vectors_ready(db):
            db.execute(f"DELETE FROM chunk_vectors WHERE rowid IN ({marks})", ids)
    db.execute("DELETE FROM chunks WHERE file_id = ?", (file_id,))
    db.execute("DELETE FROM files WHERE id = ?", (file_id,))
