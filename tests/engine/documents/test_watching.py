"""Watched folders on real files and real SQLite: a rescan picks up a new file, a changed one and a deleted
one; a symlink loop, a file over its cap and binary data under a text name do not stop the scan; the
collection and its folder survive a restart."""

from __future__ import annotations

import os

import pytest

from fireside.engine.documents.collections import Collections
from fireside.engine.documents.limits import MAX_HTML_BYTES
from fireside.engine.errors import DocumentRejected
from tests.helpers.waiting import wait_until

from .conftest import settled


def _files(c: Collections, collection_id: str) -> set[str]:
    return {c.uploads.get(m.file_id).filename for m in c.members(collection_id)}


def _found(c: Collections, collection_id: str, query: str) -> list[str]:
    return [p.filename for p in c.search([collection_id], query, k=3)]


def test_a_watched_folder_follows_new_changed_and_deleted_files(collections, tmp_path):
    folder = tmp_path / "notes"
    (folder / "garden").mkdir(parents=True)
    (folder / "lamp.md").write_text("# Lamp\n\nThe lens is polished every Tuesday.\n")
    (folder / "garden" / "beds.txt").write_text("Tomatoes grow behind the tower.\n")
    (folder / "photo.png").write_bytes(b"\x89PNG not a document")
    made = collections.watcher.watch(folder)
    assert made.name == "notes" and made.metadata["watched_folder"] == str(folder.resolve())
    settled(collections, made.id)
    assert _files(collections, made.id) == {"lamp.md", "beds.txt"}
    assert _found(collections, made.id, "tomatoes")[0] == "beds.txt"

    (folder / "bell.md").write_text("The bell rings at noon.\n")  # new
    (folder / "lamp.md").write_text("# Lamp\n\nThe lens is cleaned with vinegar on Fridays.\n")  # changed
    os.utime(folder / "lamp.md", ns=(1, 1))  # a change within the same clock tick still shows
    (folder / "garden" / "beds.txt").unlink()  # deleted
    scan = collections.watcher.rescan(made.id)
    assert (scan.added, scan.changed, scan.removed) == (1, 1, 1)
    settled(collections, made.id)
    assert _files(collections, made.id) == {"lamp.md", "bell.md"}
    assert _found(collections, made.id, "bell noon")[0] == "bell.md"
    assert _found(collections, made.id, "vinegar")[0] == "lamp.md"
    assert _found(collections, made.id, "tuesday") == []  # the old text is gone from the index
    assert _found(collections, made.id, "tomatoes") == []
    assert len(collections.uploads.list()) == 2  # the deleted and the replaced copies are gone too

    again = collections.watcher.rescan(made.id)  # nothing changed: nothing read
    assert (again.added, again.changed, again.removed) == (0, 0, 0)


def test_a_symlink_loop_is_entered_once(collections, tmp_path):
    folder = tmp_path / "loop"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner" / "note.md").write_text("Loops end here.\n")
    (folder / "inner" / "back").symlink_to(folder, target_is_directory=True)
    (folder / "self").symlink_to(".", target_is_directory=True)
    (folder / "broken.md").symlink_to(tmp_path / "nowhere.md")
    (folder / "node_modules" / "pkg").mkdir(parents=True)
    (folder / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1;\n")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD.txt").write_text("ref: main\n")
    made = collections.watcher.watch(folder)
    settled(collections, made.id)
    assert _files(collections, made.id) == {"note.md"}


def test_refused_files_are_kept_with_their_reason_and_not_read_again(collections, tmp_path):
    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "ok.md").write_text("Fine text.\n")
    (folder / "huge.html").write_bytes(b"<p>" + b"x" * MAX_HTML_BYTES + b"</p>")
    (folder / "fake.txt").write_bytes(bytes(range(256)) * 64)
    made = collections.watcher.watch(folder)
    settled(collections, made.id)
    assert _files(collections, made.id) == {"ok.md"}
    assert collections.watcher.folder(made.id).refused == 2
    reasons = collections.watcher.refusals(made.id)
    assert "is over 16 MB" in reasons["huge.html"] and "binary" in reasons["fake.txt"].lower()
    assert not list((collections.root / "files").glob("*/huge.html"))  # refused by its size, never copied
    assert collections.watcher.rescan(made.id).refused == {}  # unchanged: not tried again


def test_a_watched_collection_survives_a_restart_and_its_delete_takes_its_copies(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("Apples.\n")
    first = Collections(tmp_path / "knowledge")
    made = first.watcher.watch(folder, "Orchard")
    settled(first, made.id)
    first.close()
    second = Collections(tmp_path / "knowledge")
    try:
        assert [w.folder for w in second.watcher.folders()] == [folder.resolve()]
        (folder / "b.md").write_text("Bananas.\n")
        assert second.watcher.rescan(made.id).added == 1
        settled(second, made.id)
        assert _files(second, made.id) == {"a.md", "b.md"}
        second.delete(made.id)
        assert second.uploads.list() == [] and second.watcher.folders() == []
    finally:
        second.close()


def test_a_file_is_not_a_folder_to_watch(collections, tmp_path):
    (tmp_path / "a.md").write_text("x")
    with pytest.raises(DocumentRejected, match="is not a folder"):
        collections.watcher.watch(tmp_path / "a.md")
    assert collections.list() == []


def test_the_periodic_rescan_finds_a_new_file(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    c = Collections(tmp_path / "knowledge")
    try:
        c.watcher.interval = 0.05
        made = c.watcher.watch(folder)
        c.watcher.start()
        (folder / "late.md").write_text("Arrived later.\n")
        wait_until(lambda: c.get(made.id).counts["completed"] == 1, timeout=30)
    finally:
        c.close()
