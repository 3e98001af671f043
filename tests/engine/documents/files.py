"""Small real documents written for the document tests: a PDF with text on numbered pages and an outline
(written with pypdf: a content stream per page, Helvetica), a DOCX with headings, a table and a page
break (python-docx), and the hostile ones: an encrypted PDF, a truncated PDF, a zip-bomb DOCX."""

from __future__ import annotations

import zipfile
from pathlib import Path


def write_pdf(path: Path, pages: list[str], outline: list[tuple[str, int]] = (), password: str | None = None) -> Path:
    """A PDF whose page n (1-based) shows ``pages[n-1]`` (one line of text a ``\\n``)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    for text in pages:
        page = writer.add_blank_page(612, 792)
        lines = []
        for i, line in enumerate(text.split("\n")):
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            lines.append(f"BT /F1 11 Tf 72 {720 - 16 * i} Td ({escaped}) Tj ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(lines).encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    for title, number in outline:
        writer.add_outline_item(title=title, page_number=number - 1)
    if password is not None:
        writer.encrypt(user_password=password, owner_password=password + "-owner")
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


def write_docx(path: Path) -> Path:
    """A Word document: a title, two headed sections (the second after a page break), a table."""
    import docx
    from docx.enum.text import WD_BREAK

    doc = docx.Document()
    doc.add_heading("Lighthouse Maintenance Manual", level=0)
    doc.add_heading("Lamp Room", level=1)
    doc.add_paragraph("The lamp room lens must be polished every Tuesday with a chamois cloth.")
    doc.add_paragraph("Spare bulbs are kept in the brass cabinet beside the stairs.")
    doc.add_paragraph().add_run().add_break(WD_BREAK.PAGE)
    doc.add_heading("Fog Signal", level=1)
    doc.add_paragraph("The fog horn compressor needs fresh oil after 200 hours of running.")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Part", "Interval"
    table.cell(1, 0).text, table.cell(1, 1).text = "Diaphragm", "Five years"
    doc.save(str(path))
    return path


def write_zip_bomb_docx(path: Path, unpacked: int = 300 * 1024 * 1024) -> Path:
    """A .docx-shaped zip whose document part declares (and holds) ``unpacked`` bytes of zeros, packed
    to a few hundred kilobytes: what a zip bomb does to a reader that unpacks first."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w", force_zip64=True) as part:
            block = b"\0" * (1024 * 1024)
            for _ in range(unpacked // len(block)):
                part.write(block)
    return path
