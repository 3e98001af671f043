"""Conversations on disk: SQLite in WAL mode, with a schema version and migrations from day one.

Messages form a tree: each has a parent (``None`` for a conversation's first message), and editing a
message or regenerating a reply adds a sibling instead of overwriting, so earlier versions stay as
branches. A conversation remembers its current leaf; the thread shown is the path from the root to
that leaf, and flipping to another sibling follows that sibling's newest descendants down to a leaf.

Writes are small and synchronous on the caller's thread (the GUI thread, a few hundred microseconds
each in WAL with ``synchronous=NORMAL``): a message is written when it completes, and a streaming reply
is written before each batch of its text is shown, so a crash or a SIGKILL never loses text the user
saw. The schema and its migrations are ``migrations.py``'s: an older database is backed up, then migrated,
when the store opens it. A database from a newer Fireside (a schema this one does not know) is opened
read-only: its chats are shown, every write raises ``ReadOnlyData`` saying why, and ``Store.read_only``
holds that sentence for the window.
"""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fireside.engine.errors import ReadOnlyData

from .migrations import SCHEMA_VERSION, backup, migrate

log = logging.getLogger(__name__)


@dataclass
class Conversation:
    id: int
    title: str
    model_id: str | None
    system_prompt: str
    sampling: dict[str, Any]
    leaf_id: int | None
    created_at: float
    updated_at: float
    tools: dict[str, Any] = field(default_factory=dict)  # {"servers": [names], "max_steps": n}


@dataclass
class Message:
    id: int
    conversation_id: int
    parent_id: int | None
    role: str
    content: str
    state: str  # "complete", "streaming", "stopped" or "error"; a tool call is "pending" or "running" first
    model_id: str | None
    created_at: float
    stats: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""
    reasoning_s: float | None = None
    # the columns added by later schema versions: see migrations.py's _V3, _V4 and _V5
    tool: dict[str, Any] = field(default_factory=dict)  # see _V3
    images: list[str] = field(default_factory=list)  # file names in the images folder, in order (see _V4)
    documents: list[dict[str, Any]] = field(default_factory=list)  # {"name", "file", "kind", "pages"} (see _V5)
    sources: dict[str, Any] = field(default_factory=dict)  # a reply's {"items": [...], "note": str} (see _V5)


F = TypeVar("F", bound=Callable[..., Any])


def _writes(method: F) -> F:
    """Refuse the write with the reason when the database is open read-only."""
    @functools.wraps(method)
    def guarded(self: Store, *args: Any, **kwargs: Any) -> Any:
        if self.read_only:
            raise ReadOnlyData(self.read_only)
        return method(self, *args, **kwargs)
    return guarded  # type: ignore[return-value]


class Store:
    """The chats database. One connection, used from the thread that made it (the GUI thread).
    ``read_only`` is None, or the sentence that says why this database is not written."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.read_only: str | None = None
        self.db = _connect(self.path)
        version = self.db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._open_read_only(version)
            return
        if 0 < version < SCHEMA_VERSION:
            log.info("chats database: backed up to %s before migrating", backup(self.db, self.path, version))
        migrate(self.db)
        self.purge_deleted()
        # A reply still marked streaming was cut off by a crash: keep its text, call it stopped. So is
        # a tool call that was waiting for approval or running: it never answered.
        self.db.execute("UPDATE messages SET state = 'stopped' WHERE state IN ('streaming', 'pending', 'running')")

    def _open_read_only(self, version: int) -> None:
        self.db.close()
        self.db = _connect(self.path, read_only=True)
        self.read_only = (f"the chats database {self.path} was written by a newer version of Fireside (schema "
                          f"{version}; this version knows up to {SCHEMA_VERSION}), so your chats are shown "
                          f"read-only and nothing new is saved: update Fireside to keep chatting")
        log.warning("%s", self.read_only)

    def close(self) -> None:
        self.db.close()

    # --- conversations ---------------------------------------------------------------------------
    @_writes
    def create_conversation(self, title: str = "New chat", model_id: str | None = None,
                            system_prompt: str = "", sampling: dict | None = None) -> Conversation:
        now = time.time()
        cur = self.db.execute(
            "INSERT INTO conversations (title, model_id, system_prompt, sampling, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)", (title, model_id, system_prompt, json.dumps(sampling or {}), now, now))
        return self.conversation(cur.lastrowid)

    def conversation(self, conv_id: int) -> Conversation:
        row = self.db.execute("SELECT * FROM conversations WHERE id = ?", (conv_id,)).fetchone()
        if row is None:
            raise KeyError(conv_id)
        return _conversation(row)

    def conversations(self, search: str = "") -> list[Conversation]:
        """Newest first; ``search`` matches titles and message text, case-insensitively."""
        sql = "SELECT * FROM conversations c WHERE deleted_at IS NULL"
        args: tuple = ()
        if search.strip():
            like = f"%{_escape_like(search.strip())}%"
            sql += (" AND (title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m WHERE"
                    " m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\'))")
            args = (like, like)
        rows = self.db.execute(sql + " ORDER BY updated_at DESC, id DESC", args).fetchall()
        return [_conversation(r) for r in rows]

    @_writes
    def update_conversation(self, conv_id: int, **fields: Any) -> None:
        allowed = {"title", "model_id", "system_prompt", "sampling", "leaf_id", "tools"}
        if not fields or set(fields) - allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)}")
        for key in ("sampling", "tools"):
            if key in fields:
                fields[key] = json.dumps(fields[key])
        sets = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE conversations SET {sets}, updated_at = ? WHERE id = ?",
                        (*fields.values(), time.time(), conv_id))

    @_writes
    def delete_conversation(self, conv_id: int) -> None:
        """Hide a conversation; ``restore_conversation`` undoes this until the next start."""
        self.db.execute("UPDATE conversations SET deleted_at = ? WHERE id = ?", (time.time(), conv_id))

    @_writes
    def restore_conversation(self, conv_id: int) -> None:
        self.db.execute("UPDATE conversations SET deleted_at = NULL WHERE id = ?", (conv_id,))

    @_writes
    def purge_deleted(self) -> int:
        return self.db.execute("DELETE FROM conversations WHERE deleted_at IS NOT NULL").rowcount

    # --- messages --------------------------------------------------------------------------------
    @_writes
    def add_message(self, conv_id: int, parent_id: int | None, role: str, content: str = "",
                    state: str = "complete", model_id: str | None = None, tool: dict | None = None,
                    images: list[str] | None = None, documents: list[dict] | None = None) -> Message:
        """Add a message under ``parent_id`` and make it the conversation's current leaf; ``images`` are
        the names of saved image files sent with it, ``documents`` its attached documents (see migrations.py's _V5)."""
        now = time.time()
        with self.db:
            self.db.execute("BEGIN")
            cur = self.db.execute(
                "INSERT INTO messages (conversation_id, parent_id, role, content, state, model_id, created_at, tool)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (conv_id, parent_id, role, content, state, model_id, now, json.dumps(tool or {})))
            self.db.executemany("INSERT INTO message_images (message_id, position, name) VALUES (?, ?, ?)",
                                [(cur.lastrowid, i, name) for i, name in enumerate(images or [])])
            self.db.executemany("INSERT INTO message_documents (message_id, position, name, file, kind, pages)"
                                " VALUES (?, ?, ?, ?, ?, ?)",
                                [(cur.lastrowid, i, d["name"], d.get("file") or d["name"], d.get("kind") or "",
                                  d.get("pages")) for i, d in enumerate(documents or [])])
            self.db.execute("UPDATE conversations SET leaf_id = ?, updated_at = ? WHERE id = ?",
                            (cur.lastrowid, now, conv_id))
        return self.message(cur.lastrowid)

    def message(self, message_id: int) -> Message:
        row = self.db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise KeyError(message_id)
        return self._with_images([_message(row)])[0]

    @_writes
    def update_message(self, message_id: int, *, content: str | None = None, reasoning: str | None = None,
                       state: str | None = None, stats: dict | None = None,
                       reasoning_s: float | None = None, tool: dict | None = None,
                       sources: dict | None = None) -> None:
        fields = {k: v for k, v in (("content", content), ("reasoning", reasoning), ("state", state),
                                    ("reasoning_s", reasoning_s)) if v is not None}
        if stats is not None:
            fields["stats"] = json.dumps(stats)
        if tool is not None:
            fields["tool"] = json.dumps(tool)
        if sources is not None:
            fields["sources"] = json.dumps(sources)
        if fields:
            sets = ", ".join(f"{k} = ?" for k in fields)
            self.db.execute(f"UPDATE messages SET {sets} WHERE id = ?", (*fields.values(), message_id))

    def thread(self, conv_id: int) -> list[Message]:
        """The messages shown: from the first message down to the conversation's current leaf."""
        leaf = self.conversation(conv_id).leaf_id
        rows = self.db.execute(
            "WITH RECURSIVE up(id, depth) AS (SELECT ?, 0 UNION ALL"
            " SELECT m.parent_id, up.depth + 1 FROM messages m JOIN up ON m.id = up.id"
            " WHERE m.parent_id IS NOT NULL)"
            " SELECT m.* FROM up JOIN messages m ON m.id = up.id ORDER BY up.depth DESC", (leaf,)).fetchall()
        return self._with_images([_message(r) for r in rows])

    def siblings(self, message: Message) -> list[int]:
        """Ids of ``message`` and its alternatives (same parent), oldest first."""
        rows = self.db.execute(
            "SELECT id FROM messages WHERE conversation_id = ? AND parent_id IS ? ORDER BY id",
            (message.conversation_id, message.parent_id)).fetchall()
        return [r[0] for r in rows]

    @_writes
    def switch_branch(self, message_id: int) -> None:
        """Show the branch through ``message_id``: its newest descendants down to a leaf."""
        leaf = message_id
        while True:
            row = self.db.execute("SELECT id FROM messages WHERE parent_id = ? ORDER BY id DESC LIMIT 1",
                                  (leaf,)).fetchone()
            if row is None:
                break
            leaf = row[0]
        conv_id = self.message(message_id).conversation_id
        self.db.execute("UPDATE conversations SET leaf_id = ? WHERE id = ?", (leaf, conv_id))

    def all_messages(self, conv_id: int) -> list[Message]:
        rows = self.db.execute("SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conv_id,))
        return self._with_images([_message(r) for r in rows.fetchall()])

    # --- images ----------------------------------------------------------------------------------
    def _with_images(self, messages: list[Message]) -> list[Message]:
        """``messages`` with their images' names filled in (one query for them all)."""
        by_id = {m.id: m for m in messages}
        if not by_id:
            return messages
        try:
            rows = self.db.execute(
                f"SELECT message_id, name FROM message_images WHERE message_id IN ({','.join('?' * len(by_id))})"
                " ORDER BY message_id, position", tuple(by_id)).fetchall()
        except sqlite3.OperationalError:  # a database opened read-only from before images
            return messages
        for message_id, name in rows:
            by_id[message_id].images.append(name)
        try:
            rows = self.db.execute(
                "SELECT message_id, name, file, kind, pages FROM message_documents WHERE message_id IN"
                f" ({','.join('?' * len(by_id))}) ORDER BY message_id, position", tuple(by_id)).fetchall()
        except sqlite3.OperationalError:  # a database opened read-only from before documents
            return messages
        for message_id, name, file, kind, pages in rows:
            by_id[message_id].documents.append({"name": name, "file": file, "kind": kind, "pages": pages})
        return messages

    def document_names(self) -> set[str]:
        """Every saved document some message names (a deleted chat's count until it is purged)."""
        return _names(self.db, "SELECT DISTINCT name FROM message_documents")

    def conversation_ids(self) -> set[int]:
        """Every chat's id, deleted ones too until they are purged (Undo brings them back)."""
        return _names(self.db, "SELECT id FROM conversations")

    def image_names(self) -> set[str]:
        """Every image file some message names (a deleted chat's count until it is purged: Undo brings it back)."""
        try:
            return {r[0] for r in self.db.execute("SELECT DISTINCT name FROM message_images")}
        except sqlite3.OperationalError:
            return set()


def _names(db: sqlite3.Connection, sql: str) -> set:
    try:
        return {r[0] for r in db.execute(sql)}
    except sqlite3.OperationalError:  # a database opened read-only from before that table
        return set()


def _connect(path: Path, read_only: bool = False) -> sqlite3.Connection:
    if read_only:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None)
    else:
        db = sqlite3.connect(str(path), isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA foreign_keys = ON")
    return db


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(id=row["id"], title=row["title"], model_id=row["model_id"],
                        system_prompt=row["system_prompt"], sampling=json.loads(row["sampling"] or "{}"),
                        leaf_id=row["leaf_id"], created_at=row["created_at"], updated_at=row["updated_at"],
                        tools=_json(row, "tools"))


def _message(row: sqlite3.Row) -> Message:
    return Message(id=row["id"], conversation_id=row["conversation_id"], parent_id=row["parent_id"],
                   role=row["role"], content=row["content"], state=row["state"], model_id=row["model_id"],
                   created_at=row["created_at"], stats=json.loads(row["stats"] or "{}"),
                   reasoning=row["reasoning"], reasoning_s=row["reasoning_s"], tool=_json(row, "tool"),
                   sources=_json(row, "sources"))


def _json(row: sqlite3.Row, key: str) -> dict[str, Any]:
    """A JSON column, or {} on a database opened read-only before it had that column."""
    if key not in row.keys():
        return {}
    return json.loads(row[key] or "{}")
