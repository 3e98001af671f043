"""Documents that cost far more than their size are refused before the work, and the work that is allowed
never holds up another collection and stops when its file goes (issue 42, cases 1 and 2).

The hostile files are a few kilobytes (``tests/helpers/hostile_docs.py``): a PDF whose 1,000 pages share
one 4 MB content stream (pypdf parsed it again for every page: about an hour), one page drawing a 64 KB
form 2,000 times, and a .docx with twelve 1 MiB header parts (python-docx parsed them all: +193 MB).
"""

from __future__ import annotations

import io
import threading
import time

import pytest

from fireside.engine.documents import pdf, word
from fireside.engine.documents.collections import Collections
from fireside.engine.documents.readers import read_document
from fireside.engine.errors import DocumentRejected
from tests.engine.documents.files import write_docx
from tests.helpers.flowing import busiest_reader, ended, peak_rss_during, tree_cpu_s
from tests.helpers.hostile_docs import form_drawing_pdf, header_heavy_docx, shared_stream_pdf
from tests.helpers.waiting import wait_until

NOTE = b"# Harbour\n\nThe ferry leaves at nine.\n"
SLOW = {"pages": 80, "stream_bytes": 64 * 1024}  # 5 MiB of parsing, 20-40 s here; a page a fraction of a second


def test_a_pdf_whose_pages_share_one_big_stream_is_refused_before_a_page_is_parsed(tmp_path):
    path = shared_stream_pdf(tmp_path / "bomb.pdf", pages=1000, stream_bytes=4 * 1024 * 1024)
    assert path.stat().st_size < 200_000
    started = time.monotonic()
    with pytest.raises(DocumentRejected) as caught:
        read_document(path)
    assert time.monotonic() - started < 5  # the old reader: ~4 s a page, 1,000 pages
    assert "MB of page content" in str(caught.value) and f"{pdf.MAX_PDF_CONTENT:,}" in str(caught.value)
    assert "of 1,000" in str(caught.value) and caught.value.reason == "too_large"


def test_a_page_that_draws_one_form_many_times_is_counted_for_each_draw(tmp_path):
    path = form_drawing_pdf(tmp_path / "forms.pdf", draws=2000, form_bytes=64 * 1024)
    started = time.monotonic()
    with pytest.raises(DocumentRejected, match="MB of page content"):
        read_document(path)
    assert time.monotonic() - started < 5


def test_reading_a_pdf_stops_within_a_page_once_cancelled(tmp_path):
    path = shared_stream_pdf(tmp_path / "slow.pdf", **SLOW)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(pdf.Cancelled):
        read_document(path, cancel=cancel)
    assert time.monotonic() - started < 3  # the whole file takes 20 s and more


def test_header_parts_are_never_parsed_and_the_body_is_still_read(tmp_path):
    path = header_heavy_docx(tmp_path / "tides.docx")
    assert path.stat().st_size < 100_000
    doc, grew = peak_rss_during(read_document, path)
    assert "forty minutes" in " ".join(b.text for b in doc.blocks)
    assert grew < 40 * 1024 * 1024, f"reading grew the process {grew >> 20} MB"  # the old reader: +193 MB


def test_a_docx_whose_body_is_over_the_xml_cap_is_refused_naming_it(tmp_path, monkeypatch):
    path = write_docx(tmp_path / "manual.docx")
    monkeypatch.setattr(word, "MAX_DOCX_XML", 4096)
    with pytest.raises(DocumentRejected, match=r"bytes of XML; Fireside reads .docx files whose body") as caught:
        read_document(path)
    assert caught.value.reason == "too_large"


def _wait_running(c: Collections, collection_id: str) -> None:
    wait_until(lambda: any(t.name == f"fireside-indexer-{collection_id}" for t in threading.enumerate()), 10)
    time.sleep(0.5)  # into its pages


def test_a_long_file_in_one_collection_does_not_hold_up_another_and_removing_it_kills_its_reader(collections,
                                                                                                 tmp_path):
    slow = collections.uploads.save(shared_stream_pdf(tmp_path / "slow.pdf", **SLOW).open("rb"), "slow.pdf",
                                    "assistants")
    first = collections.create("big", [slow.id])
    _wait_running(collections, first.id)
    note = collections.uploads.save(io.BytesIO(NOTE), "note.md", "assistants")
    second = collections.create("small", [note.id])
    took = wait_until(lambda: collections.member(second.id, note.id).status == "completed", timeout=120)
    assert took < 5, f"the note waited {took:.1f} s behind the other collection's PDF"
    assert collections.member(first.id, slow.id).status == "in_progress"  # the PDF really was still being read
    reader = busiest_reader()  # read in a process of its own, not in this one
    collections.delete_file(slow.id)
    wait_until(lambda: ended(reader), timeout=1)  # killed at once, not left to finish its page
    before = tree_cpu_s()
    time.sleep(1.0)
    assert tree_cpu_s() - before < 0.3, "the deleted file's PDF is still being read"
    assert [p.file_id for p in collections.search([second.id], "ferry")] == [note.id]


def test_a_costly_pdf_fails_at_once_and_is_not_read_again_after_a_restart(tmp_path):
    first = Collections(tmp_path / "knowledge")
    bomb = first.uploads.save(shared_stream_pdf(tmp_path / "b.pdf", 1000, 4 * 1024 * 1024).open("rb"), "b.pdf",
                              "assistants")
    store = first.create("s", [bomb.id])
    took = wait_until(lambda: first.member(store.id, bomb.id).status != "in_progress", timeout=60)
    member = first.member(store.id, bomb.id)
    assert took < 5 and member.status == "failed" and member.error_code == "invalid_file"
    assert "page content" in member.error_message
    first.close()
    again = Collections(tmp_path / "knowledge")
    try:
        assert again.member(store.id, bomb.id).status == "failed"
        assert not [t for t in threading.enumerate() if t.name.startswith("fireside-indexer")]
    finally:
        again.close()


DIES_READING = """
import os, sys, time
import apsw
from pathlib import Path
from fireside.engine.documents.collections import Collections
c = Collections(Path(sys.argv[1]))
tries = int(sys.argv[2])  # the reading this process begins is the file's tries-th
if tries == 1:  # first run: upload the PDF and put it in a collection
    stored = c.uploads.save(open(sys.argv[3], "rb"), "slow.pdf", "assistants")
    print(c.create("s", [stored.id]).id, stored.id, flush=True)
else:
    c.registry  # opening resumes what was left in progress
# read on a connection of its own: the indexer's connection sees its own write before the commit, and a
# process that died before the commit (an fsync on a busy disk) would leave no try on record. apsw, the
# registry's own SQLite: a second SQLite library in one process would truncate the WAL index under it (SIGBUS)
watch = apsw.Connection(str(Path(sys.argv[1]) / "registry.sqlite3"))
deadline = time.monotonic() + 60
while (watch.execute("SELECT max(tries) FROM reading").fetchone()[0] or 0) < tries:  # it has begun, on record
    if time.monotonic() > deadline:
        os._exit(3)
    time.sleep(0.01)
time.sleep(0.2)
os._exit(1)  # as a process killed while it reads the file
"""


def test_a_file_whose_reading_killed_the_process_twice_is_failed_not_read_a_third_time(tmp_path):
    import subprocess
    import sys

    root, pdf_path = tmp_path / "knowledge", shared_stream_pdf(tmp_path / "slow.pdf", **SLOW)
    first = subprocess.run([sys.executable, "-c", DIES_READING, str(root), "1", str(pdf_path)], capture_output=True,
                           text=True, timeout=120)
    store, file_id = first.stdout.split()
    second = subprocess.run([sys.executable, "-c", DIES_READING, str(root), "2"], capture_output=True, timeout=120)
    assert (first.returncode, second.returncode) == (1, 1), second.stderr[-500:]  # 3: a reading never began
    c = Collections(root)
    try:
        member = c.member(store, file_id)
        assert member.status == "failed" and "stopped the process 2 times" in member.error_message
        assert not [t for t in threading.enumerate() if t.name.startswith("fireside-indexer")]
    finally:
        c.close()
