"""Documents are read in a process of their own (issue 42, case 1): what comes back is what the readers
make in-process, documents and refusals alike; one process serves a collection's run of files; and a
reader that is stopped, runs past its time, dies, or outlives the process that started it is killed, its
file failed in words, and the collections go on."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import psutil
import pytest

from fireside.engine.documents import pdf, read_document, reader_process
from fireside.engine.documents.reader_process import ReaderProcess
from fireside.engine.errors import DocumentRejected
from tests.helpers.flowing import busiest_reader, ended, reader_processes
from tests.helpers.hostile_docs import shared_stream_pdf
from tests.helpers.waiting import wait_until

from .conftest import settled
from .files import write_docx, write_pdf

SLOW = {"pages": 80, "stream_bytes": 64 * 1024}  # 20-40 s of parsing
NOTE = b"# Harbour\n\nThe ferry leaves at nine.\n"


@pytest.fixture
def reader():
    r = ReaderProcess()
    yield r
    r.close()


def test_documents_and_refusals_come_back_as_the_readers_make_them_from_one_process(reader, tmp_path):
    md = tmp_path / "notes.md"
    md.write_text("# Garden\n\nWater daily.\n\n```\nwater()\n```\n")
    files = [md, write_docx(tmp_path / "manual.docx"), write_pdf(tmp_path / "gauge.pdf", ["Tides", "Set the float."])]
    for path in files:
        assert reader.read(path) == read_document(path)
    pid = reader.pid
    truncated = tmp_path / "cut.pdf"
    truncated.write_bytes(files[2].read_bytes()[:200])
    for bad in (truncated, tmp_path / "tool.exe", tmp_path / "missing.md"):
        with pytest.raises(DocumentRejected) as here:
            read_document(bad)
        with pytest.raises(DocumentRejected) as there:
            reader.read(bad)
        assert (str(there.value), there.value.reason, there.value.path) == (str(here.value), here.value.reason,
                                                                            here.value.path)
    assert reader.pid == pid != psutil.Process().pid  # one process read them all, and not this one


def test_a_cancelled_read_kills_its_process_at_once_and_the_next_read_starts_another(reader, tmp_path):
    slow = shared_stream_pdf(tmp_path / "slow.pdf", **SLOW)
    md = tmp_path / "n.md"
    md.write_bytes(NOTE)
    reader.read(md)
    first = psutil.Process(reader.pid)
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    with pytest.raises(pdf.Cancelled):
        reader.read(slow, cancel=cancel)
    wait_until(lambda: ended(first), timeout=1)  # killed, not left to finish its page
    assert "ferry" in reader.read(md).text and reader.pid != first.pid


def test_a_read_past_its_time_is_killed_and_refused_saying_so(tmp_path):
    reader = ReaderProcess(max_seconds=1)
    try:
        started = time.monotonic()
        with pytest.raises(DocumentRejected, match=r"reading slow.pdf took over 1 s, so it was stopped") as caught:
            reader.read(shared_stream_pdf(tmp_path / "slow.pdf", **SLOW))
        assert caught.value.reason == "too_slow" and time.monotonic() - started < 5
        assert reader.pid is None
    finally:
        reader.close()


def test_a_reader_that_runs_too_long_fails_its_file_and_the_collection_goes_on(collections, tmp_path, monkeypatch):
    monkeypatch.setattr(reader_process, "MAX_READ_SECONDS", 1.0)
    slow = collections.uploads.save(shared_stream_pdf(tmp_path / "slow.pdf", **SLOW).open("rb"), "slow.pdf",
                                    "assistants")
    note = collections.uploads.save(io.BytesIO(NOTE), "note.md", "assistants")
    store = collections.create("s", [slow.id, note.id])
    settled(collections, store.id)
    failed = collections.member(store.id, slow.id)
    assert (failed.status, failed.error_code) == ("failed", "invalid_file")
    assert "took over 1 s" in failed.error_message
    assert collections.member(store.id, note.id).status == "completed"


def test_a_reader_that_dies_fails_its_file_in_words_and_the_next_file_is_read(collections, tmp_path):
    slow = collections.uploads.save(shared_stream_pdf(tmp_path / "slow.pdf", **SLOW).open("rb"), "slow.pdf",
                                    "assistants")
    store = collections.create("s", [slow.id])
    wait_until(lambda: reader_processes(), timeout=30)
    time.sleep(0.5)  # into its pages
    busiest_reader().kill()  # as the OOM killer, or a crash in a C parser
    wait_until(lambda: collections.member(store.id, slow.id).status != "in_progress", timeout=10)
    failed = collections.member(store.id, slow.id)
    assert (failed.status, failed.error_code) == ("failed", "server_error")
    assert "stopped its reader process (killed by SIGKILL)" in failed.error_message
    note = collections.uploads.save(io.BytesIO(NOTE), "note.md", "assistants")
    collections.add(store.id, note.id)
    settled(collections, store.id)
    assert [p.file_id for p in collections.search([store.id], "ferry")] == [note.id]


STARTS_AND_DIES = """
import os, sys, threading, time
from fireside.engine.documents.reader_process import ReaderProcess
reader = ReaderProcess()
threading.Thread(target=reader.read, args=(sys.argv[1],), daemon=True).start()
while reader.pid is None:
    time.sleep(0.01)
print(reader.pid, flush=True)
time.sleep(1.0)  # into its pages
os._exit(1)  # as a server killed while a file is read
"""


def test_a_reader_ends_when_the_process_that_started_it_dies(tmp_path):
    slow = shared_stream_pdf(tmp_path / "slow.pdf", **SLOW)
    done = subprocess.run([sys.executable, "-c", STARTS_AND_DIES, str(slow)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr[-500:]
    pid = int(done.stdout)
    try:
        orphan = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return  # already gone
    wait_until(lambda: ended(orphan), timeout=2)  # not parsing on for the 20 s the file takes
