"""Small documents that cost a reader far more than their size (issue 42): a PDF whose pages all point at
one big content stream (pypdf parses it again for every page), a PDF whose page draws one form many
times, and a .docx with many 1 MiB header parts (each under the per-part zip-ratio check, all parsed by
python-docx). Each is a few kilobytes on disk."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

LINE = b"BT /F1 11 Tf 72 720 Td (the keeper polishes the brass lens) Tj ET\n"
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
HEADER_TYPE = "application/vnd.openxmlformats-officedocument.wordprocessingml.header+xml"
HEADER_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/header"


def _writer():
    from pypdf import PdfWriter
    from pypdf.generic import DictionaryObject, NameObject

    writer = PdfWriter()
    font = writer._add_object(DictionaryObject({NameObject("/Type"): NameObject("/Font"),
                                                NameObject("/Subtype"): NameObject("/Type1"),
                                                NameObject("/BaseFont"): NameObject("/Helvetica")}))
    return writer, DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})


def _stream(writer, data: bytes, **entries):
    from pypdf.generic import DecodedStreamObject, NameObject

    stream = DecodedStreamObject()
    stream.set_data(data)
    for key, value in entries.items():
        stream[NameObject(f"/{key}")] = value
    return writer._add_object(stream.flate_encode())


def shared_stream_pdf(path: Path, pages: int, stream_bytes: int) -> Path:
    """``pages`` pages whose /Contents is one and the same stream of ``stream_bytes`` of text operators."""
    from pypdf.generic import NameObject

    writer, resources = _writer()
    ref = _stream(writer, LINE * max(1, stream_bytes // len(LINE)))
    for _ in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Contents")] = ref
        page[NameObject("/Resources")] = resources
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


def form_drawing_pdf(path: Path, draws: int, form_bytes: int) -> Path:
    """One page that draws one form XObject of ``form_bytes`` of text operators ``draws`` times."""
    from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject

    writer, resources = _writer()
    box = ArrayObject([FloatObject(0), FloatObject(0), FloatObject(612), FloatObject(792)])
    form = _stream(writer, LINE * max(1, form_bytes // len(LINE)), Type=NameObject("/XObject"),
                   Subtype=NameObject("/Form"), BBox=box, Resources=resources)
    page = writer.add_blank_page(612, 792)
    page[NameObject("/Contents")] = _stream(writer, b"/Fm1 Do\n" * draws)
    page[NameObject("/Resources")] = DictionaryObject({**resources, NameObject("/XObject"): DictionaryObject(
        {NameObject("/Fm1"): form})})
    with open(path, "wb") as fh:
        writer.write(fh)
    return path


def header_heavy_docx(path: Path, headers: int = 12, header_bytes: int = 1024 * 1024) -> Path:
    """A real python-docx document plus ``headers`` header parts of ``header_bytes`` of dense XML each,
    related from the body (so python-docx loads them), each compressed far past the ratio cap but kept
    to 1 MiB, where the per-part ratio check did not look."""
    import docx

    doc = docx.Document()
    doc.add_heading("Tide tables", level=1)
    doc.add_paragraph("High water at the harbour mouth comes forty minutes after the pier.")
    base = io.BytesIO()
    doc.save(base)
    unit = "<w:p><w:r><w:t>x</w:t></w:r></w:p>"
    body = f'<w:hdr xmlns:w="{W}">' + unit * ((header_bytes - 200) // len(unit))
    body = (body + " " * (header_bytes - len(body) - len("</w:hdr>")) + "</w:hdr>").encode()
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == "[Content_Types].xml":
                extra = "".join(f'<Override PartName="/word/header{i}.xml" ContentType="{HEADER_TYPE}"/>'
                                for i in range(headers))
                data = data.replace(b"</Types>", extra.encode() + b"</Types>")
            elif info.filename == "word/_rels/document.xml.rels":
                extra = "".join(f'<Relationship Id="rIdH{i}" Type="{HEADER_REL}" Target="header{i}.xml"/>'
                                for i in range(headers))
                data = data.replace(b"</Relationships>", extra.encode() + b"</Relationships>")
            out.writestr(info, data)
        for i in range(headers):
            out.writestr(f"word/header{i}.xml", body)
    return path
