"""The chats store: WAL, branches, search, soft delete with undo, and a migration from schema 1."""

from __future__ import annotations

import sqlite3

from fireside.app.migrations import MIGRATIONS, SCHEMA_VERSION, migrate
from fireside.app.store import Store


def test_wal_and_schema_version(tmp_path):
    store = Store(tmp_path / "chats.sqlite3")
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_migration_from_version_1_keeps_the_chats(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=1)
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at, leaf_id) VALUES (1, 'old', 0, 0, 2)")
    db.execute("INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1, 1, 'user', 'hi', 0)")
    db.execute("INSERT INTO messages (id, conversation_id, parent_id, role, content, created_at)"
               " VALUES (2, 1, 1, 'assistant', 'hello', 0)")
    db.close()
    store = Store(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    thread = store.thread(1)
    assert [(m.role, m.content, m.reasoning) for m in thread] == [("user", "hi", ""), ("assistant", "hello", "")]
    assert [c.title for c in store.conversations()] == ["old"]


def test_branches_follow_the_newest_descendants(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    conv = store.create_conversation("t")
    q1 = store.add_message(conv.id, None, "user", "q1")
    a1 = store.add_message(conv.id, q1.id, "assistant", "a1")
    q1b = store.add_message(conv.id, None, "user", "q1 edited")
    a1b = store.add_message(conv.id, q1b.id, "assistant", "a1b")
    assert [m.id for m in store.thread(conv.id)] == [q1b.id, a1b.id]
    assert store.siblings(q1b) == [q1.id, q1b.id]
    store.switch_branch(q1.id)
    assert [m.id for m in store.thread(conv.id)] == [q1.id, a1.id]


def test_search_matches_titles_and_text_and_delete_can_be_undone(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    a = store.create_conversation("Cats")
    b = store.create_conversation("Other")
    store.add_message(b.id, None, "user", "tell me about 100% dogs")
    assert [c.title for c in store.conversations("cat")] == ["Cats"]
    assert [c.title for c in store.conversations("100%")] == ["Other"]
    store.delete_conversation(a.id)
    assert [c.title for c in store.conversations()] == ["Other"]
    store.restore_conversation(a.id)
    assert len(store.conversations()) == 2
    store.delete_conversation(a.id)
    store.close()
    assert [c.title for c in Store(tmp_path / "c.sqlite3").conversations()] == ["Other"]


def test_migration_from_version_2_keeps_the_chats_and_adds_tools(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=2)
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at, leaf_id) VALUES (1, 'v2 chat', 0, 0, 2)")
    db.execute("INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1, 1, 'user', 'hi', 0)")
    db.execute("INSERT INTO messages (id, conversation_id, parent_id, role, content, reasoning, created_at)"
               " VALUES (2, 1, 1, 'assistant', 'hello', 'hmm', 0)")
    db.close()
    store = Store(path)
    assert (tmp_path / "chats.sqlite3.bak-v2").exists()
    thread = store.thread(1)
    assert [(m.content, m.reasoning, m.tool) for m in thread] == [("hi", "", {}), ("hello", "hmm", {})]
    assert store.conversation(1).tools == {}
    call = store.add_message(1, 2, "tool", "", "pending", None, {"server": "s", "tool": "t", "call_id": "c1"})
    store.update_conversation(1, tools={"servers": ["s"], "max_steps": 3})
    store.close()
    again = Store(path)  # a call left waiting by a crash is stopped, not lost
    assert again.message(call.id).state == "stopped" and again.message(call.id).tool["server"] == "s"
    assert again.conversation(1).tools == {"servers": ["s"], "max_steps": 3}


def test_migration_from_version_3_keeps_the_chats_and_adds_images(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=3)
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at, leaf_id) VALUES (1, 'v3 chat', 0, 0, 1)")
    db.execute("INSERT INTO messages (id, conversation_id, role, content, created_at) VALUES (1, 1, 'user', 'hi', 0)")
    db.close()
    store = Store(path)
    assert (tmp_path / "chats.sqlite3.bak-v3").exists()
    assert [(m.content, m.images) for m in store.thread(1)] == [("hi", [])]
    a = store.add_message(1, 1, "user", "two", images=["b.png", "a.png"])
    other = store.create_conversation("other")
    store.add_message(other.id, None, "user", "", images=["a.png"])
    assert store.message(a.id).images == ["b.png", "a.png"]  # in the order they were attached
    assert store.image_names() == {"a.png", "b.png"}
    store.delete_conversation(1)
    assert store.image_names() == {"a.png", "b.png"}  # Undo can still bring it back
    store.close()
    again = Store(path)  # purged at the next start: its images go with it, the other chat's stay
    assert again.image_names() == {"a.png"}
