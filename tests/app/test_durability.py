"""Files the app replaces survive a crash whole, and saved chats survive upgrades and downgrades:
preferences, the remotes registry and exports go through one atomic write (temp, fsync, rename, fsync
the folder); a chats database from a newer Fireside opens read-only with the reason; a migration first
backs the database up."""

from __future__ import annotations

import json
import os
import sqlite3
import stat

import pytest

from fireside.app import export
from fireside.app.migrations import SCHEMA_VERSION, migrate
from fireside.app.prefs import Prefs
from fireside.app.store import Store
from fireside.engine.errors import ReadOnlyData
from fireside.engine.remote.registry import RemoteRegistry
from fireside.engine.settings import Settings


@pytest.fixture
def fsyncs(monkeypatch):
    """Every fsync, as (kind, name): the file's data and then its folder's entry must both be synced."""
    seen: list[tuple[str, str]] = []
    real = os.fsync

    def record(fd: int) -> None:
        st = os.fstat(fd)
        seen.append(("dir" if stat.S_ISDIR(st.st_mode) else "file", os.readlink(f"/proc/self/fd/{fd}")))
        real(fd)

    monkeypatch.setattr(os, "fsync", record)
    return seen


def crash_before_rename(monkeypatch):
    def crash(*_args, **_kw):
        raise OSError("power cut")

    monkeypatch.setattr(os, "replace", crash)


def test_prefs_are_fsynced_then_renamed_and_the_folder_synced(tmp_path, fsyncs):
    prefs = Prefs(tmp_path / "prefs.json")
    prefs.set("theme", "dark")
    assert [kind for kind, _ in fsyncs] == ["file", "dir"]
    assert fsyncs[1][1] == str(tmp_path)
    assert json.loads((tmp_path / "prefs.json").read_text())["theme"] == "dark"


def test_a_crash_before_the_rename_keeps_the_old_prefs_and_no_litter(tmp_path, monkeypatch):
    prefs = Prefs(tmp_path / "prefs.json")
    prefs.set("theme", "dark")
    crash_before_rename(monkeypatch)
    with pytest.raises(OSError, match="power cut"):
        prefs.set("theme", "light")
    assert json.loads((tmp_path / "prefs.json").read_text())["theme"] == "dark"
    assert os.listdir(tmp_path) == ["prefs.json"]


def test_an_export_over_an_earlier_one_is_all_or_nothing(tmp_path, monkeypatch, fsyncs):
    path = tmp_path / "chat.md"
    export.save(path, "# Earlier export\n")
    assert [kind for kind, _ in fsyncs] == ["file", "dir"]
    crash_before_rename(monkeypatch)
    with pytest.raises(OSError):
        export.save(path, "# A much longer export that never finished\n" * 1000)
    assert path.read_text() == "# Earlier export\n"
    assert os.listdir(tmp_path) == ["chat.md"]


def test_remotes_registry_is_written_atomically(fireside_home, fsyncs):
    registry = RemoteRegistry(Settings.from_env())
    registry.add("gpu", "http://gpu-box:8000/v1/")
    assert [kind for kind, _ in fsyncs] == ["file", "dir"]
    assert [e.name for e in registry.list()] == ["gpu"]


def newer_database(path, version: int = SCHEMA_VERSION + 1) -> None:
    store = Store(path)
    conv = store.create_conversation("From the future")
    store.add_message(conv.id, None, "user", "hello from a newer Fireside")
    store.close()
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("ALTER TABLE messages ADD COLUMN future_column TEXT")
    db.execute(f"PRAGMA user_version = {version}")
    db.close()


def test_a_database_from_a_newer_fireside_opens_read_only_with_the_reason(tmp_path):
    path = tmp_path / "chats.sqlite3"
    newer_database(path)
    store = Store(path)  # before: RuntimeError, and the app did not start
    assert store.read_only and "newer version of Fireside" in store.read_only and "read-only" in store.read_only
    [conv] = store.conversations()
    assert [m.content for m in store.thread(conv.id)] == ["hello from a newer Fireside"]
    with pytest.raises(ReadOnlyData, match="update Fireside"):
        store.add_message(conv.id, None, "user", "lost?")
    with pytest.raises(ReadOnlyData):
        store.create_conversation()
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1, "left as it was"
    assert db.execute("SELECT count(*) FROM messages").fetchone()[0] == 1


def test_a_migration_backs_the_database_up_first(tmp_path):
    path = tmp_path / "chats.sqlite3"
    db = sqlite3.connect(path, isolation_level=None)
    migrate(db, target=1)
    db.execute("INSERT INTO conversations (id, title, created_at, updated_at) VALUES (1, 'old', 0, 0)")
    db.close()
    Store(path).close()
    backup = tmp_path / "chats.sqlite3.bak-v1"
    assert backup.is_file()
    saved = sqlite3.connect(backup)
    assert saved.execute("PRAGMA user_version").fetchone()[0] == 1
    assert saved.execute("SELECT title FROM conversations").fetchall() == [("old",)]
    saved.close()
    Store(path).close()  # already current: no second backup, no new file
    assert sorted(p.name for p in tmp_path.glob("*.bak-*")) == ["chats.sqlite3.bak-v1"]


def test_a_new_database_needs_no_backup(tmp_path):
    Store(tmp_path / "chats.sqlite3").close()
    assert not list(tmp_path.glob("*.bak-*"))


def test_the_app_says_its_chats_are_read_only_and_still_shows_them(qtbot, make_app, shared_runtime):
    settings = Settings.from_env()
    settings.ensure_dirs()
    newer_database(settings.chats_db)
    app = make_app(shared_runtime, settings)
    notice = app.window.notice.text.text()
    assert "newer version of Fireside" in notice and "read-only" in notice
    assert app.ctx.store.read_only
