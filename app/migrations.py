"""The chats database's schema, one migration a version: ``PRAGMA user_version`` holds the version a database
is at, and ``MIGRATIONS[n]`` takes it from version n to n + 1, each in one transaction (``migrate``). Before
migrating, the store copies the database whole (SQLite's backup API, ``backup``) to ``NAME.bak-v<N>``, so an
upgrade that goes wrong can be undone by hand. The tables' columns are read back into ``store.py``'s
``Conversation`` and ``Message``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from fireside.engine.fsutil import fsync_dir

_V1 = """
CREATE TABLE conversations (
    id            INTEGER PRIMARY KEY,
    title         TEXT NOT NULL,
    model_id      TEXT,
    system_prompt TEXT NOT NULL DEFAULT '',
    sampling      TEXT NOT NULL DEFAULT '{}',
    leaf_id       INTEGER,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE TABLE messages (
    id              INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    parent_id       INTEGER REFERENCES messages(id) ON DELETE CASCADE,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL DEFAULT '',
    state           TEXT NOT NULL DEFAULT 'complete',
    model_id        TEXT,
    stats           TEXT NOT NULL DEFAULT '{}',
    created_at      REAL NOT NULL
);
"""

# v2: folded reasoning with its duration, soft delete (for undo), and indexes for threads and search.
_V2 = """
ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT '';
ALTER TABLE messages ADD COLUMN reasoning_s REAL;
ALTER TABLE conversations ADD COLUMN deleted_at REAL;
CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id);
"""

# v3: tools. A message's ``tool`` holds, for the model's reply, the calls it made and, for a ``tool``
# message, the call it answers (server, tool, arguments, outcome); a chat's ``tools`` holds which
# servers' tools are on and the step limit. Old rows get '{}': a chat without tools, as before.
_V3 = """
ALTER TABLE messages ADD COLUMN tool TEXT NOT NULL DEFAULT '{}';
ALTER TABLE conversations ADD COLUMN tools TEXT NOT NULL DEFAULT '{}';
"""

# v4: images. A user message names the images sent with it, in order: files in ``data_dir/images``
# named by the SHA-256 of their bytes (``bridge/attachments.py``), so one picture sent in two chats is one
# file, kept while any message names it. Rows go with their message (and so with their chat).
_V4 = """
CREATE TABLE message_images (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    PRIMARY KEY (message_id, position)
);
CREATE INDEX message_images_by_name ON message_images(name);
"""

# v5: documents and sources. A user message names the documents attached to it, in order: files in
# ``data_dir/documents`` named by the SHA-256 of their bytes (``bridge/chatdocs.py``), with the name the
# user knows (``file``), the reader's kind and the page count. A reply keeps the sources it was given
# (``{"items": [{"n", "file", "page", "page_end", "heading", "text", "name", "ordinal", "mode"}],
# "note": ...}``, see ``engine/documents/grounding.py``); old rows get '{}': a reply without sources.
_V5 = """
CREATE TABLE message_documents (
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    file       TEXT NOT NULL,
    kind       TEXT NOT NULL DEFAULT '',
    pages      INTEGER,
    PRIMARY KEY (message_id, position)
);
CREATE INDEX message_documents_by_name ON message_documents(name);
ALTER TABLE messages ADD COLUMN sources TEXT NOT NULL DEFAULT '{}';
"""

MIGRATIONS = [_V1, _V2, _V3, _V4, _V5]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring ``db`` up to schema ``target``; returns the version it was at."""
    start = db.execute("PRAGMA user_version").fetchone()[0]
    if start > SCHEMA_VERSION:
        raise RuntimeError(f"chats database is from a newer Fireside (schema {start} > {SCHEMA_VERSION})")
    for version in range(start, target):
        with db:
            if not db.in_transaction:
                db.execute("BEGIN")
            for statement in filter(str.strip, MIGRATIONS[version].split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {version + 1}")
    return start


def backup(db: sqlite3.Connection, path: Path, version: int) -> Path:
    """Copy the open database ``db`` (at schema ``version``) whole to ``path.bak-v<version>``, durably."""
    dest = path.with_name(f"{path.name}.bak-v{version}")
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.unlink(missing_ok=True)
    copy = sqlite3.connect(str(tmp))
    try:
        db.backup(copy)
    finally:
        copy.close()
    os.replace(tmp, dest)
    fsync_dir(dest.parent)
    return dest
