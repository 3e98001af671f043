"""HTML pages through the standard library's ``html.parser``: h1-h6 open sections, ``pre`` stays one
code block, paragraphs, list items, table cells and definitions are paragraphs; scripts, styles and
navigation (``nav``, ``header``, ``footer``, ``aside``, anything with ``role="navigation"``) are skipped,
so a documentation site's sidebars do not drown its text. Sphinx's pilcrow links (¶) are dropped."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

from .document import Block, Document, Outline
from .limits import MAX_HTML_BYTES
from .text import decode_text, read_bytes_capped

_SKIP = {"script", "style", "nav", "header", "footer", "aside", "head", "noscript", "template", "svg", "button", "form"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
_BREAKS = {"p", "li", "dd", "dt", "td", "th", "div", "section", "article", "blockquote", "tr", "table", "ul",
           "ol", "dl", "main", "figure", "figcaption", "caption", "body"}
_HEADINGS = {f"h{n}": n for n in range(1, 7)}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.title = ""
        self._outline = Outline()
        self._stack: list[str] = []
        self._skip_at: int | None = None  # stack depth where a skipped element opened
        self._text: list[str] = []
        self._pre = 0
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            if tag == "br" and self._skip_at is None:
                self._text.append("\n")
            return
        attrs = dict(attrs)
        self._stack.append(tag)
        if self._skip_at is None and (tag in _SKIP or attrs.get("role") == "navigation"
                                      or "headerlink" in (attrs.get("class") or "")):
            self._skip_at = len(self._stack)
        if tag == "title":
            self._in_title = True
        if self._skip_at is not None:
            return
        if tag in _HEADINGS or tag in _BREAKS or tag == "pre":
            self._flush()
        if tag == "pre":
            self._pre += 1

    def handle_endtag(self, tag):
        if tag not in self._stack:
            return  # a stray end tag
        while self._stack:
            open_tag = self._stack.pop()
            self._close(open_tag)
            if open_tag == tag:
                break

    def _close(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._skip_at is not None:
            if len(self._stack) < self._skip_at:
                self._skip_at = None
            return
        if tag in _HEADINGS:
            text = _clean(" ".join(self._text))
            self._text.clear()
            if text:
                level = _HEADINGS[tag]
                self.blocks.append(Block("heading", text, level=level, headings=self._outline.heading(level, text)))
        elif tag == "pre":
            code = "".join(self._text).strip("\n")
            self._text.clear()
            self._pre -= 1
            if code.strip():
                self.blocks.append(Block("code", code, headings=self._outline.path))
        elif tag in _BREAKS:
            self._flush()

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if self._skip_at is None and self._stack and "head" not in self._stack:
            self._text.append(data)

    def _flush(self) -> None:
        text = _clean(" ".join(self._text))
        self._text.clear()
        if text:
            self.blocks.append(Block("paragraph", text, headings=self._outline.path))

    def finish(self) -> list[Block]:
        self.close()
        if self._pre:
            code = "".join(self._text).strip("\n")
            self._text.clear()
            if code.strip():
                self.blocks.append(Block("code", code, headings=self._outline.path))
        self._flush()
        return self.blocks


def _clean(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("¶", "")).strip()


def html_blocks(source: str) -> tuple[list[Block], str]:
    """The blocks of an HTML page and its title."""
    reader = _Reader()
    reader.feed(source)
    blocks = reader.finish()
    return blocks, _clean(reader.title)


def read_html(path: Path) -> Document:
    source = decode_text(read_bytes_capped(path, MAX_HTML_BYTES, "HTML pages"), path)
    blocks, title = html_blocks(source)
    return Document(str(path), "html", blocks, title=title)
