"""PDF files through pypdf: each page's text split into paragraphs that know their page, under the
headings of the PDF's outline (its bookmarks) where it has one. Encrypted PDFs that need a password,
and files pypdf cannot parse, are refused with a ``DocumentRejected`` saying which."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import DocumentRejected
from .document import Block, Document
from .limits import MAX_EXTRACTED_CHARS, MAX_PDF_BYTES, MAX_PDF_PAGES

log = logging.getLogger(__name__)


def read_pdf(path: Path, on_page: Callable[[int, int], None] | None = None) -> Document:
    """``on_page(number, count)`` is called before each page is read (it may raise to stop the reading)."""
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
    titles = _outline_by_page(reader)
    blocks, total, heading = [], 0, ()
    for number in range(1, count + 1):
        heading = titles.get(number, heading)
        if on_page is not None:
            on_page(number, count)
        try:
            text = reader.pages[number - 1].extract_text() or ""
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
