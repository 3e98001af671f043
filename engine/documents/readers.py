"""Which reader reads a file: chosen by its suffix (``.pdf``, ``.docx``, ``.html``/``.htm``, ``.md``,
source code, plain text), and refused with a ``DocumentRejected`` when it is none of these.

Threading: any thread; a reader holds no state. Callers run it off the GUI thread (it reads the disk).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import DocumentRejected
from .document import Document
from .pdf import read_pdf
from .text import read_code, read_markdown, read_plain
from .webpage import read_html
from .word import read_docx

CODE_SUFFIXES = {".py", ".pyi", ".js", ".mjs", ".ts", ".tsx", ".jsx", ".rs", ".go", ".c", ".h", ".cc", ".cpp",
                 ".hpp", ".java", ".kt", ".swift", ".rb", ".php", ".cs", ".sh", ".bash", ".zsh", ".lua",
                 ".sql", ".r", ".jl", ".scala", ".toml", ".yaml", ".yml", ".json", ".ini", ".cfg"}
TEXT_SUFFIXES = {".txt", ".text", ".log", ".csv", ".tsv", ".rst", ".org", ".tex", ".srt", ""}
READERS = {".pdf": read_pdf, ".docx": read_docx, ".html": read_html, ".htm": read_html, ".xhtml": read_html,
           ".md": read_markdown, ".markdown": read_markdown}


def reader_for(path: Path):
    suffix = path.suffix.lower()
    if suffix in READERS:
        return READERS[suffix]
    if suffix in CODE_SUFFIXES:
        return read_code
    if suffix in TEXT_SUFFIXES:
        return read_plain
    return None


def can_read(path: Path | str) -> bool:
    return reader_for(Path(path)) is not None


def read_document(path: Path | str, on_page: Callable[[int, int], None] | None = None,
                  cancel: threading.Event | None = None) -> Document:
    """The document at ``path``, read into blocks; a ``DocumentRejected`` names what is wrong with it.
    ``on_page(number, count)`` is called before each page of a PDF is read (the other kinds are read at
    once, under their caps); an exception it raises stops the reading and comes out of here. ``cancel``
    set stops a PDF's reading within a page operator (``pdf.Cancelled``)."""
    path = Path(path)
    reader = reader_for(path)
    if reader is None:
        raise DocumentRejected(f"{path.name}: Fireside does not read {path.suffix} files (it reads PDF, .docx, HTML, "
                               "Markdown, plain text and source code)", "unsupported", str(path))
    if not path.is_file():
        raise DocumentRejected(f"{path} is not a file (deleted, moved, or a folder)", "missing", str(path))
    doc = read_pdf(path, on_page, cancel) if reader is read_pdf else reader(path)
    for_path = str(path)
    doc.path = for_path
    return doc
