"""Knowledge collections on real SQLite files: uploads checked as they are written, files indexed by the
background worker (and again after a stop mid-way), failures kept with their reason, search reading only
finished files."""

from __future__ import annotations

import io

import pytest

from fireside.engine.documents.collections import Collections
from fireside.engine.documents.registry import Registry
from fireside.engine.errors import DocumentNotFound, DocumentRejected
from tests.helpers.waiting import wait_until

from .conftest import settled
from .files import write_pdf

NOTES = b"# Lamp room\n\nThe lens is polished every Tuesday.\n\n# Garden\n\nTomatoes grow behind the tower.\n"


def test_a_collection_indexes_its_files_and_finds_passages_in_them(collections, tmp_path):
    notes = collections.uploads.save(io.BytesIO(NOTES), "notes.md", "assistants")
    pdf = write_pdf(tmp_path / "ledger.pdf", ["Ledger", "The quince trees were pruned in February."])
    ledger = collections.uploads.save(pdf.open("rb"), "ledger.pdf", "assistants")
    made = collections.create("notes", [notes.id, ledger.id])
    settled(collections, made.id)
    [quince] = collections.search([made.id], "when were the quince trees pruned", k=1)
    assert (quince.file_id, quince.filename, quince.page) == (ledger.id, "ledger.pdf", 2)
    [lens] = collections.search([made.id], "lens polished", k=1)
    assert (lens.file_id, lens.heading, lens.score) == (notes.id, "Lamp room", 1.0)
    assert collections.get(made.id).counts["completed"] == 2


def test_an_upload_keeps_only_its_own_name(collections):
    stored = collections.uploads.save(io.BytesIO(NOTES), "../../etc/evil.md", "assistants")
    assert stored.filename == "evil.md"
    assert stored.path.parent.parent == collections.root / "files"


def test_a_file_left_in_progress_by_a_stop_is_indexed_when_the_collections_open_again(tmp_path):
    first = Collections(tmp_path / "knowledge")
    stored = first.uploads.save(io.BytesIO(NOTES), "notes.md", "assistants")
    first.close()
    registry = Registry(tmp_path / "knowledge" / "registry.sqlite3")  # as a process that died mid-way leaves it
    with registry.db:
        registry.db.execute("INSERT INTO collections VALUES('vs_left', 'left', '{}', 0, 0)")
        registry.db.execute("INSERT INTO members(collection_id, file_id, status, created_at) VALUES(?,?,?,0)",
                            ("vs_left", stored.id, "in_progress"))
    registry.close()
    again = Collections(tmp_path / "knowledge")
    try:
        settled(again, "vs_left")
        assert again.search(["vs_left"], "tomatoes")[0].file_id == stored.id
    finally:
        again.close()


def test_a_file_without_text_fails_saying_so(collections, tmp_path):
    blank = collections.uploads.save(io.BytesIO(b"\n\n   \n"), "blank.md", "assistants")
    made = collections.create("blank", [blank.id])
    wait_until(lambda: collections.member(made.id, blank.id).status != "in_progress", timeout=30)
    member = collections.member(made.id, blank.id)
    assert (member.status, member.error_code) == ("failed", "invalid_file")
    assert "holds no text" in member.error_message


def test_search_reads_only_finished_files_and_unknown_ids_say_which(collections):
    stored = collections.uploads.save(io.BytesIO(NOTES), "notes.md", "assistants")
    made = collections.create("notes")
    assert collections.search([made.id], "tomatoes") == []
    with pytest.raises(DocumentNotFound, match="vs_nope"):
        collections.search(["vs_nope"], "tomatoes")
    with pytest.raises(DocumentNotFound, match="file-nope"):
        collections.add(made.id, "file-nope")
    collections.add(made.id, stored.id)
    settled(collections, made.id)
    collections.remove(made.id, stored.id)
    assert collections.search([made.id], "tomatoes") == []


def test_an_upload_is_refused_before_anything_is_kept(collections):
    for name, data, words in [("a.md", b"", "is empty"), ("a.txt", b"\x00\x01\x02" * 100, "binary data"),
                              ("a.pdf", b"<html>", "not a PDF"), ("a.bin", b"x", "does not read .bin")]:
        with pytest.raises(DocumentRejected, match=words):
            collections.uploads.save(io.BytesIO(data), name, "assistants")
    assert collections.uploads.list() == []
    assert list((collections.root / "files").iterdir()) == []
