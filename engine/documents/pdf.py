"""PDF files through pypdf: each page's text split into paragraphs that know their page, under the
headings of the PDF's outline (its bookmarks) where it has one. Encrypted PDFs that need a password,
and files pypdf cannot parse, are refused with a ``DocumentRejected`` saying which.

What reading will cost is known before any page is parsed: pypdf parses a page's content streams, and
the forms it draws, again for every page (and every time a page draws a form), so a 160 KB file whose
1,000 pages all point at one 4 MB stream is 4 GB of parsing, about an hour. ``content_cost`` adds up
those bytes (each stream decoded once to learn its size) and a PDF over ``MAX_PDF_CONTENT`` is refused
with its figure. ``cancel`` (a ``threading.Event``) stops the reading between pages and between a
page's operators."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from pathlib import Path

from ..errors import DocumentRejected
from .document import Block, Document
from .limits import MAX_EXTRACTED_CHARS, MAX_PDF_BYTES, MAX_PDF_CONTENT, MAX_PDF_PAGES

log = logging.getLogger(__name__)


class Cancelled(Exception):
    """The reading was stopped by its ``cancel`` event (the file was removed, or the process is closing)."""


def read_pdf(path: Path, on_page: Callable[[int, int], None] | None = None,
             cancel: threading.Event | None = None) -> Document:
    """``on_page(number, count)`` is called before each page is read (it may raise to stop the reading);
    ``cancel``, once set, stops it with ``Cancelled`` within one page operator."""
    import pypdf  # imported here: only PDF reading pays for it
    from pypdf.errors import PdfReadError

    _check_size(path)
    try:
        reader = pypdf.PdfReader(str(path), strict=False)
        _unlock(reader, path)
        count = len(reader.pages)
    except DocumentRejected:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as e:
        raise _corrupt(path, e) from e
    if count > MAX_PDF_PAGES:
        raise DocumentRejected(f"{path.name} has {count:,} pages; Fireside reads PDFs of up to {MAX_PDF_PAGES:,} pages",
                               "too_large", str(path))
    _check_cost(reader, path, count, cancel)
    titles = _outline_by_page(reader)
    blocks, total, heading = [], 0, ()

    def visit(*_: object) -> None:  # called by pypdf before each operator of a page
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"reading {path.name} was stopped")

    for number in range(1, count + 1):
        heading = titles.get(number, heading)
        visit()
        if on_page is not None:
            on_page(number, count)
        try:
            text = reader.pages[number - 1].extract_text(visitor_operand_before=visit) or ""
        except Cancelled:
            raise
        except Exception as e:  # noqa: BLE001 - one bad page (a broken content stream) must not lose the rest
            log.warning("%s: page %d cannot be read: %s", path.name, number, e)
            continue
        total += len(text)
        if total > MAX_EXTRACTED_CHARS:
            raise DocumentRejected(f"{path.name} yields over {MAX_EXTRACTED_CHARS:,} characters of text",
                                   "too_large", str(path))
        blocks.extend(Block("paragraph", p, page=number, headings=heading) for p in _page_paragraphs(text))
    if count and not blocks:
        raise DocumentRejected(f"{path.name} has no text to read (a scanned PDF needs OCR, which Fireside "
                               "does not do)", "corrupt", str(path))
    return Document(str(path), "pdf", blocks, pages=count)


def _check_cost(reader, path: Path, count: int, cancel: threading.Event | None) -> None:
    """Refuse the PDF, before a page is parsed, when its pages' content is over ``MAX_PDF_CONTENT``."""
    sizes: dict[object, int] = {}
    total = 0
    for number in range(count):
        if cancel is not None and cancel.is_set():
            raise Cancelled(f"reading {path.name} was stopped")
        try:
            total += content_cost(reader.pages[number], sizes)
        except DocumentRejected:
            raise
        except Exception as e:  # noqa: BLE001 - a page whose content cannot be found is read (and skipped) later
            log.warning("%s: page %d's content cannot be measured: %s", path.name, number + 1, e)
        if total > MAX_PDF_CONTENT:
            raise DocumentRejected(
                f"{path.name} holds over {MAX_PDF_CONTENT // (1024 * 1024)} MB of page content to parse (by page "
                f"{number + 1:,} of {count:,}: {total:,} bytes, a stream or form counted once for each page and "
                f"each time a page draws it); Fireside parses up to {MAX_PDF_CONTENT:,} bytes a PDF. Split the "
                "PDF, or save it as text and add that", "too_large", str(path))


_DRAW = re.compile(rb"/[^\s/\[\]()<>{}%]+\s*Do(?![^\s/\[\]()<>{}%])")  # a name, then the Do that draws it
MAX_FORM_DEPTH = 8  # forms drawing forms: pypdf follows them; deeper nesting costs as if it were over the cap


def content_cost(page, sizes: dict[object, int]) -> int:
    """The bytes pypdf parses to read ``page``'s text: its content streams, plus, for each time it draws
    a form XObject, that form's cost (forms drawing forms followed ``MAX_FORM_DEPTH`` deep). ``sizes``
    remembers each stream's decoded size and drawing count, so a shared stream is decoded once."""
    from pypdf.generic import ArrayObject

    contents = page.get("/Contents")
    items = contents.get_object() if contents is not None else []
    streams = list(items) if isinstance(items, ArrayObject) else [contents] if contents is not None else []
    size, draws = 0, 0
    for ref in streams:
        n, d = _measure(ref, sizes)
        size, draws = size + n, draws + d
    return size + draws * _forms_cost(page.get("/Resources"), sizes, MAX_FORM_DEPTH)


def _measure(ref, sizes: dict[object, int]) -> tuple[int, int]:
    """(decoded bytes, form draws) of one stream, decoded once whatever refers to it."""
    from pypdf.generic import StreamObject

    key = (getattr(ref, "idnum", None), getattr(ref, "generation", None)) if hasattr(ref, "idnum") else id(ref)
    if key not in sizes:
        obj = ref.get_object()
        data = obj.get_data() if isinstance(obj, StreamObject) else b""
        sizes[key] = len(data)
        sizes[(key, "draws")] = len(_DRAW.findall(data)) if b"Do" in data else 0
    return sizes[key], sizes[(key, "draws")]


def _forms_cost(resources, sizes: dict[object, int], depth: int) -> int:
    """The cost of drawing the costliest form named in ``resources`` once (0 when it names none)."""
    resources = resources.get_object() if resources is not None else None
    xobjects = resources.get("/XObject") if hasattr(resources, "get") else None
    xobjects = xobjects.get_object() if xobjects is not None else None
    if not hasattr(xobjects, "values"):
        return 0
    memo = ("forms", id(xobjects), depth)  # resources shared by many forms are costed once a depth
    if memo in sizes:
        return sizes[memo]
    worst = 0
    for ref in xobjects.values():
        form = ref.get_object()
        if not hasattr(form, "get") or form.get("/Subtype") != "/Form":
            continue
        if depth <= 0:
            return MAX_PDF_CONTENT + 1
        n, draws = _measure(ref, sizes)
        worst = max(worst, n + (draws * _forms_cost(form.get("/Resources"), sizes, depth - 1) if draws else 0))
    sizes[memo] = worst
    return worst


def _check_size(path: Path) -> None:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            magic = fh.read(1024)
    except OSError as e:
        raise DocumentRejected(f"{path.name} cannot be read: {e.strerror or e}", "missing", str(path)) from e
    if size > MAX_PDF_BYTES:
        raise DocumentRejected(f"{path.name} is {size:,} bytes; Fireside reads PDFs up to "
                               f"{MAX_PDF_BYTES // (1024 * 1024)} MB", "too_large", str(path))
    if b"%PDF-" not in magic:
        raise DocumentRejected(f"{path.name} is not a PDF (no %PDF- header)", "corrupt", str(path))


def _unlock(reader, path: Path) -> None:
    """An encrypted PDF opens only when its user password is empty (many are encrypted just to set
    permissions); otherwise it is refused: Fireside does not ask for passwords."""
    if not reader.is_encrypted:
        return
    try:
        opened = reader.decrypt("")
    except Exception as e:  # noqa: BLE001 - pypdf raises several kinds for ciphers it lacks
        raise DocumentRejected(f"{path.name} is encrypted and cannot be opened: {e}", "encrypted", str(path)) from e
    if not opened:
        raise DocumentRejected(f"{path.name} is encrypted with a password; remove the password and add it again",
                               "encrypted", str(path))


def _corrupt(path: Path, e: Exception) -> DocumentRejected:
    return DocumentRejected(f"{path.name} is not a readable PDF (damaged or truncated): {e}", "corrupt", str(path))


def _outline_by_page(reader) -> dict[int, tuple[str, ...]]:
    """Page number -> the outline's heading path that starts on it (nested bookmarks give the path)."""
    found: dict[int, tuple[str, ...]] = {}

    def walk(items, path: tuple[str, ...]) -> None:
        last = path
        for item in items:
            if isinstance(item, list):
                walk(item, last)
                continue
            try:
                number = reader.get_destination_page_number(item) + 1
            except Exception:  # noqa: BLE001 - a bookmark to nowhere is skipped
                continue
            last = (*path, str(item.title).strip())
            found.setdefault(number, last)

    try:
        walk(reader.outline, ())
    except Exception as e:  # noqa: BLE001 - a broken outline leaves pages without headings, not the PDF unread
        log.warning("%s: the outline cannot be read: %s", reader, e)
    return found


def _page_paragraphs(text: str) -> list[str]:
    parts = [p.strip() for p in re.split(r"\n\s*\n", text)]
    if len(parts) == 1 and parts[0].count("\n") > 12:  # no blank lines: pypdf often gives one line per text row
        lines, parts, current = parts[0].splitlines(), [], []
        for line in lines:
            current.append(line)
            if line.rstrip().endswith((".", ":", "?", "!")) and sum(map(len, current)) > 400:
                parts.append("\n".join(current))
                current = []
        parts.append("\n".join(current))
    return [p for p in parts if p]
