"""Uploaded files (the API's ``/v1/files``): each kept whole under ``files/<id>/<name>`` in the knowledge
folder and recorded in the registry, so a collection can index it and a client can read it back.

An upload is checked as it is written, so a bad file is refused before anything keeps it: its name must
have a suffix a reader takes (``readers.py``), it must not be empty or over that reader's cap
(``limits.py``; counted while copying, so a stream that lies about its size still stops), and its first
bytes must look like what its name says (a PDF starts ``%PDF-``, a .docx is a zip with a Word body that
is not a zip bomb, a text file is not binary data). What only a full read finds (a PDF broken past its
header, an encrypted one) fails later, when a collection indexes it, with the reason.

Threading: any thread; ``save`` reads and writes the disk, so servers call it off their event loop.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import DocumentNotFound, DocumentRejected
from .limits import MAX_DOCX_BYTES, MAX_HTML_BYTES, MAX_PDF_BYTES, MAX_TEXT_BYTES, READ_BLOCK, SNIFF_BYTES
from .readers import reader_for
from .registry import Registry
from .text import decode_text
from .word import check_zip

MAX_NAME_CHARS = 200
_CAPS = {".pdf": MAX_PDF_BYTES, ".docx": MAX_DOCX_BYTES, ".html": MAX_HTML_BYTES, ".htm": MAX_HTML_BYTES,
         ".xhtml": MAX_HTML_BYTES}


@dataclass(frozen=True)
class StoredFile:
    """An uploaded file: ``id`` (``file-...``), the ``filename`` it was sent as, its ``purpose``, its
    size in ``bytes``, when it came (``created_at``, Unix seconds) and where it is kept (``path``)."""

    id: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    path: Path


def cap_for(suffix: str) -> int:
    """The most bytes a file with this suffix may hold: its reader's cap."""
    return _CAPS.get(suffix.lower(), MAX_TEXT_BYTES)


def safe_name(filename: str | None) -> str:
    """The file's own name, without any folders a client put before it or control characters."""
    name = Path((filename or "").replace("\\", "/")).name
    name = re.sub(r"[\x00-\x1f\x7f]", "", name).strip()
    if name in ("", ".", ".."):
        raise DocumentRejected("the upload has no file name (send it as a multipart file with a name, such as "
                               "notes.md)", "unsupported")
    if len(name) > MAX_NAME_CHARS:
        suffix = Path(name).suffix[:20]
        name = name[:MAX_NAME_CHARS - len(suffix)] + suffix
    return name


class Uploads:
    """The uploaded files of one knowledge folder."""

    def __init__(self, registry: Registry, folder: Path):
        self.registry, self.folder = registry, folder

    def save(self, source: BinaryIO, filename: str | None, purpose: str) -> StoredFile:
        """Copy ``source`` in as a new file; ``DocumentRejected`` (nothing kept) when it is refused."""
        name = safe_name(filename)
        if reader_for(Path(name)) is None:
            raise DocumentRejected(f"{name}: Fireside does not read {Path(name).suffix} files (it reads PDF, .docx, "
                                   "HTML, Markdown, plain text and source code)", "unsupported", name)
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        target = self.folder / file_id / name
        target.parent.mkdir(parents=True)
        try:
            size = _copy_capped(source, target, cap_for(target.suffix), name)
            check_upload(target, size)
        except BaseException:
            shutil.rmtree(target.parent, ignore_errors=True)
            raise
        stored = StoredFile(file_id, name, purpose, size, int(time.time()), target)
        with self.registry.lock, self.registry.db:
            self.registry.db.execute("INSERT INTO files VALUES(?,?,?,?,?,?)", (stored.id, stored.filename, purpose,
                                                                              size, stored.created_at, str(target)))
        return stored

    def get(self, file_id: str) -> StoredFile:
        """The file ``file_id``; ``DocumentNotFound`` when there is none."""
        with self.registry.lock:
            row = self.registry.db.execute("SELECT * FROM files WHERE id = ?", (file_id,)).fetchone()
        if row is None:
            raise DocumentNotFound(f"no file with id {file_id!r}", "file", "file_id")
        return _stored(row)

    def list(self, purpose: str | None = None) -> list[StoredFile]:
        """Every file (of ``purpose``, if given), oldest first."""
        with self.registry.lock:
            rows = self.registry.db.execute("SELECT * FROM files WHERE ?1 IS NULL OR purpose = ?1 "
                                            "ORDER BY created_at, rowid", (purpose,)).fetchall()
        return [_stored(r) for r in rows]

    def delete(self, file_id: str) -> None:
        """Forget ``file_id`` and remove its bytes (the caller takes it out of collections first)."""
        stored = self.get(file_id)
        with self.registry.lock, self.registry.db:
            self.registry.db.execute("DELETE FROM files WHERE id = ?", (file_id,))
        shutil.rmtree(stored.path.parent, ignore_errors=True)


def _stored(row) -> StoredFile:
    file_id, filename, purpose, size, created_at, path = row
    return StoredFile(file_id, filename, purpose, size, created_at, Path(path))


def _copy_capped(source: BinaryIO, target: Path, cap: int, name: str) -> int:
    total = 0
    with open(target, "wb") as out:
        while block := source.read(READ_BLOCK):
            total += len(block)
            if total > cap:
                raise DocumentRejected(f"{name} is over {cap // (1024 * 1024)} MB; Fireside reads {target.suffix or 'text'} "
                                       f"files up to {cap // (1024 * 1024)} MB", "too_large", name)
            out.write(block)
    return total


def check_upload(path: Path, size: int) -> None:
    """Refuse a file whose first bytes say it is not what its name says (see the module docstring)."""
    if size == 0:
        raise DocumentRejected(f"{path.name} is empty", "empty", path.name)
    suffix = path.suffix.lower()
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if suffix == ".pdf":
        if b"%PDF-" not in head[:1024]:
            raise DocumentRejected(f"{path.name} is not a PDF (it does not start with %PDF-)", "corrupt", path.name)
    elif suffix == ".docx":
        check_zip(path)
    else:
        decode_text(head, path)  # raises DocumentRejected for binary data
