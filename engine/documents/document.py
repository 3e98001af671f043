"""What a reader makes of a file: a ``Document``, an ordered list of ``Block``s (a heading, a paragraph
or a code block), each knowing its page (PDF, or DOCX by explicit page breaks) and the headings it sits
under. Chunking (``chunking.py``) and the index (``index.py``) read only these types."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Block:
    """One unit of a document's structure. ``kind`` is ``heading``, ``paragraph`` or ``code``; ``level``
    is a heading's depth (1 for a title); ``page`` is 1-based, or None where the format has no pages;
    ``headings`` is the path of headings above this block (a heading's own path ends with itself)."""

    kind: str
    text: str
    page: int | None = None
    level: int = 0
    headings: tuple[str, ...] = ()


@dataclass
class Document:
    """A file read into blocks. ``kind`` is the reader that read it (``pdf``, ``docx``, ``html``,
    ``markdown``, ``text``, ``code``); ``pages`` is the page count where the format has pages."""

    path: str
    kind: str
    blocks: list[Block] = field(default_factory=list)
    pages: int | None = None
    title: str = ""

    @property
    def text(self) -> str:
        return "\n\n".join(b.text for b in self.blocks)


class Outline:
    """Builds heading paths while a reader walks a document: ``heading(level, text)`` opens a section,
    closing any at the same level or deeper; ``path`` is the headings now open, outermost first."""

    def __init__(self) -> None:
        self._open: list[tuple[int, str]] = []

    def heading(self, level: int, text: str) -> tuple[str, ...]:
        while self._open and self._open[-1][0] >= level:
            self._open.pop()
        self._open.append((level, text))
        return self.path

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(t for _, t in self._open)
