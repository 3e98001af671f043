"""Bad input never crashes a reader: each hostile or broken file is refused with a ``DocumentRejected``
whose message says what is wrong, quickly and without reading past the caps."""

from __future__ import annotations

import time
import zipfile

import pytest

from fireside.engine.documents import DocumentIndex, limits, read_document
from fireside.engine.errors import DocumentRejected

from .files import write_pdf, write_zip_bomb_docx


def _refused(path, reason: str, words: str) -> DocumentRejected:
    with pytest.raises(DocumentRejected) as info:
        read_document(path)
    assert info.value.reason == reason
    assert words in str(info.value), str(info.value)
    return info.value


def test_an_encrypted_pdf_is_refused_saying_so(tmp_path):
    pdf = write_pdf(tmp_path / "secret.pdf", ["The vault code is 4411."], password="hunter2")
    _refused(pdf, "encrypted", "encrypted with a password")


def test_a_pdf_encrypted_with_an_empty_password_is_read(tmp_path):
    pdf = write_pdf(tmp_path / "open.pdf", ["Permissions only, no password."], password="")
    assert "Permissions only" in read_document(pdf).text


@pytest.mark.parametrize("damage", ["truncated", "garbage", "not a pdf"])
def test_a_corrupt_pdf_is_refused_saying_so(tmp_path, damage):
    pdf = write_pdf(tmp_path / "good.pdf", ["Some text on a page."] * 3)
    data = pdf.read_bytes()
    broken = {"truncated": data[:len(data) // 3], "garbage": data[:20] + bytes(range(256)) * 40,
              "not a pdf": b"just some words\n" * 50}[damage]
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(broken)
    err = _refused(bad, "corrupt", "bad.pdf")
    assert "PDF" in str(err)


def test_a_zip_bomb_docx_is_refused_before_it_is_unpacked(tmp_path):
    bomb = write_zip_bomb_docx(tmp_path / "bomb.docx")
    assert bomb.stat().st_size < 2 * 1024 * 1024  # 300 MB of zeros, packed
    start = time.perf_counter()
    _refused(bomb, "zip_bomb", "zip bomb")
    assert time.perf_counter() - start < 1.0


def test_a_small_but_dense_zip_bomb_is_refused_by_its_ratio(tmp_path):
    bomb = write_zip_bomb_docx(tmp_path / "dense.docx", unpacked=20 * 1024 * 1024)  # under the total cap
    _refused(bomb, "zip_bomb", "times its packed size")


def test_a_docx_that_is_not_a_zip_or_not_word_is_refused(tmp_path):
    junk = tmp_path / "junk.docx"
    junk.write_bytes(b"PK\x03\x04 not really a zip" * 10)
    _refused(junk, "corrupt", "not a readable .docx")
    other = tmp_path / "other.docx"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("content.xml", "<office:document/>")  # an OpenDocument file renamed
    _refused(other, "corrupt", "not a Word document")
    empty_body = write_zip_bomb_docx(tmp_path / "empty.docx", unpacked=0)  # a document part with no XML
    _refused(empty_body, "corrupt", "not a readable .docx")


def test_a_huge_text_file_is_refused_at_the_cap_without_reading_it(tmp_path, monkeypatch):
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as fh:  # a sparse 2 GB file: no disk used, reading it whole would take seconds
        fh.truncate(2 * 1024 ** 3)
    start = time.perf_counter()
    err = _refused(huge, "too_large", "Fireside reads text files up to 32 MB")
    assert "2,147,483,648 bytes" in str(err)  # refused from its size, before a byte was read
    assert time.perf_counter() - start < 0.5


def test_a_text_file_that_grows_past_the_cap_is_stopped_while_streaming(tmp_path, monkeypatch):
    """The size on disk is checked first, but the stream is counted too (a file being written, a wrong size)."""
    monkeypatch.setattr(limits, "MAX_TEXT_BYTES", 3 * limits.READ_BLOCK)
    from fireside.engine.documents import text
    monkeypatch.setattr(text, "MAX_TEXT_BYTES", 3 * limits.READ_BLOCK)
    grow = tmp_path / "grow.txt"
    grow.write_text("word " * (limits.READ_BLOCK // 5))
    real_stat = type(grow).stat
    monkeypatch.setattr(type(grow), "stat", lambda self, **kw: _Small(real_stat(self, **kw)))
    grow.write_text("word " * (4 * limits.READ_BLOCK // 5))
    _refused(grow, "too_large", "up to 3 MB")


class _Small:
    """A stat result that reports a size of 10 bytes (as a file that grows after the stat)."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return 10 if name == "st_size" else getattr(self._real, name)


@pytest.mark.parametrize("payload", [bytes(range(256)) * 64, b"\x89PNG\r\n\x1a\n" + bytes(4000),
                                     b"\x7fELF\x02\x01\x01" + bytes(range(40)) * 50])
def test_binary_data_renamed_txt_is_refused(tmp_path, payload):
    fake = tmp_path / "notes.txt"
    fake.write_bytes(payload)
    _refused(fake, "binary", "holds binary data, not text")


def test_a_kind_not_read_and_a_missing_file_are_refused(tmp_path):
    (tmp_path / "song.mp3").write_bytes(b"ID3")
    _refused(tmp_path / "song.mp3", "unsupported", "does not read .mp3 files")
    _refused(tmp_path / "gone.txt", "missing", "not a file")


def test_the_index_refuses_bad_files_and_keeps_the_good_ones(tmp_path):
    index = DocumentIndex(tmp_path / "docs.db")
    good = tmp_path / "good.md"
    good.write_text("# Bees\n\nBees make honey from nectar.\n")
    index.add_file(good)
    bad = tmp_path / "bad.txt"
    bad.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(DocumentRejected, match="binary"):
        index.add_file(bad)
    with pytest.raises(DocumentRejected, match="cannot be read"):
        index.add_file(tmp_path / "never.txt")
    (tmp_path / "loop_a.txt").symlink_to(tmp_path / "loop_b.txt")
    (tmp_path / "loop_b.txt").symlink_to(tmp_path / "loop_a.txt")
    with pytest.raises(DocumentRejected, match="loop_a.txt cannot be read"):
        index.add_file(tmp_path / "loop_a.txt")
    assert [p for p, _, _ in index.files()] == [str(good.resolve())]
    assert index.search("honey").hits[0].text == "Bees make honey from nectar."
