"""Word documents (.docx) through python-docx, after the zip's declared sizes are checked, so a zip bomb
is refused before any part is unpacked. Paragraphs styled as headings (and the Title) open sections;
tables are read row by row; pages are counted from explicit page breaks, since a .docx holds no layout.

python-docx parses every XML part a document relates to (headers, footers, comments, numbering...), and
lxml holds about 15 times a part's size: 12 header parts of 1 MiB each (22 KB zipped) grew the server
228 MB. Only the parts this reader reads are handed to python-docx (``_reading_copy``): the body, its
styles, the core properties and the package's relationships and content types, together at most
``MAX_DOCX_XML`` unpacked; every other part is replaced by an empty stand-in, never unpacked."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

from ..errors import DocumentRejected
from .document import Block, Document, Outline
from .limits import MAX_DOCX_BYTES, MAX_DOCX_RATIO, MAX_DOCX_UNPACKED, MAX_DOCX_XML, MAX_EXTRACTED_CHARS

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING = re.compile(r"^(?:Heading|heading)\s*(\d)$")
READ_PARTS = {"[Content_Types].xml", "_rels/.rels", "word/_rels/document.xml.rels", "word/document.xml",
              "word/styles.xml", "docProps/core.xml"}  # what python-docx parses for this reader
_STUB_XML = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
             b'<w:stub xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>')
_STUB_RELS = (b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
              b'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>')


def check_zip(path: Path) -> None:
    """Refuse a .docx that is no zip, lacks a Word body, or whose parts would unpack past the caps.
    The declared sizes are binding: Python's zipfile stops each part at its declared size."""
    try:
        size = path.stat().st_size
        if size > MAX_DOCX_BYTES:
            raise DocumentRejected(f"{path.name} is {size:,} bytes; Fireside reads .docx files up to "
                                   f"{MAX_DOCX_BYTES // (1024 * 1024)} MB", "too_large", str(path))
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise DocumentRejected(f"{path.name} is not a readable .docx (not a zip archive): {e}", "corrupt", str(path)) from e
    except OSError as e:
        raise DocumentRejected(f"{path.name} cannot be read: {e.strerror or e}", "missing", str(path)) from e
    total = sum(i.file_size for i in infos)
    if total > MAX_DOCX_UNPACKED:
        raise DocumentRejected(f"{path.name} would unpack to {total:,} bytes (a zip bomb?); Fireside unpacks .docx "
                               f"files up to {MAX_DOCX_UNPACKED // (1024 * 1024)} MB", "zip_bomb", str(path))
    for info in infos:
        if info.file_size > 1024 * 1024 and info.file_size > MAX_DOCX_RATIO * max(info.compress_size, 1):
            raise DocumentRejected(f"{path.name}: its part {info.filename} unpacks {info.file_size // max(info.compress_size, 1):,} "
                                   f"times its packed size (a zip bomb?); the cap is {MAX_DOCX_RATIO}", "zip_bomb", str(path))
    if "word/document.xml" not in {i.filename for i in infos}:
        raise DocumentRejected(f"{path.name} is a zip archive but not a Word document", "corrupt", str(path))
    parsed = sum(i.file_size for i in infos if i.filename in READ_PARTS)
    if parsed > MAX_DOCX_XML:
        raise DocumentRejected(f"{path.name}'s text and styles unpack to {parsed:,} bytes of XML; Fireside reads .docx "
                               f"files whose body, styles and package parts are up to {MAX_DOCX_XML // (1024 * 1024)} MB "
                               "of XML. Split the document, or save it as plain text and add that", "too_large", str(path))


def _reading_copy(path: Path) -> io.BytesIO:
    """The .docx with only ``READ_PARTS`` unpacked (stored, not compressed again); every other part is an
    empty stand-in of its kind, so python-docx finds each part it relates to but parses nothing there."""
    out = io.BytesIO()
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as copy:
        for info in z.infolist():
            if info.filename in READ_PARTS:
                data = z.read(info)
            elif info.filename.endswith(".rels"):
                data = _STUB_RELS
            elif info.filename.endswith(".xml"):
                data = _STUB_XML
            else:
                data = b""  # media, fonts, embedded files: python-docx keeps them as bytes; this reader never looks
            copy.writestr(info.filename, data)
    out.seek(0)
    return out


def read_docx(path: Path) -> Document:
    check_zip(path)
    import docx  # python-docx, imported here: only .docx reading pays for it

    try:
        doc = docx.Document(_reading_copy(path))
        blocks = _blocks(doc)
    except DocumentRejected:
        raise
    except Exception as e:  # noqa: BLE001 - python-docx and lxml raise many kinds for a broken part
        raise DocumentRejected(f"{path.name} is not a readable .docx: {e}", "corrupt", str(path)) from e
    pages = max((b.page or 1 for b in blocks), default=1)
    return Document(str(path), "docx", blocks, pages=pages, title=doc.core_properties.title or "")


def _blocks(doc) -> list[Block]:
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    outline, blocks, page, total = Outline(), [], 1, 0
    for child in doc.element.body.iterchildren():
        if child.tag == f"{_W}p":
            para = Paragraph(child, doc)
            if child.find(f"{_W}pPr/{_W}pageBreakBefore") is not None:
                page += 1
            text, level = para.text.strip(), _level(para)
            if text and level:
                blocks.append(Block("heading", text, page, level, outline.heading(level, text)))
            elif text:
                blocks.append(Block("paragraph", text, page, headings=outline.path))
            page += sum(1 for br in child.iter(f"{_W}br") if br.get(f"{_W}type") == "page")
        elif child.tag == f"{_W}tbl":
            rows = [" | ".join(c.text.strip() for c in row.cells) for row in Table(child, doc).rows]
            text = "\n".join(r for r in rows if r.strip(" |"))
            if text:
                blocks.append(Block("paragraph", text, page, headings=outline.path))
        else:
            continue
        total += len(blocks[-1].text) if blocks else 0
        if total > MAX_EXTRACTED_CHARS:
            raise DocumentRejected(f"the document yields over {MAX_EXTRACTED_CHARS:,} characters of text", "too_large")
    return blocks


def _level(para) -> int:
    name = (para.style.name if para.style is not None else "") or ""
    if name == "Title":
        return 1
    m = _HEADING.match(name)
    return int(m.group(1)) + 1 if m else 0  # Heading 1 sits under the Title
