"""The sources of a reply grounded in documents: the numbered list under its card, the ``[n]`` markers in
its text made links, and the dialog that shows one passage in its context.

A source is the dict the reply was saved with (``engine/documents/grounding.py``: file, page, heading,
the passage). These widgets only show it; the passages around it are read by the bridge
(``bridge/chatdocs.py``) on the task pool and handed to ``SourceDialog``.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..bridge import CITATION, cited, source_label
from .markdown import FENCE

EXCERPT = 160  # characters of a passage shown in the list
SHOWN = 5  # sources listed before "show all" (a document given whole lists every passage)


def link_citations(text: str, count: int) -> str:
    """``text`` (Markdown) with each ``[n]`` that names one of ``count`` sources made a ``source:n`` link;
    code blocks are left as they are."""
    if not count:
        return text

    def link(m) -> str:
        n = int(m.group(1))
        return f"[\\[{n}\\]](source:{n})" if 1 <= n <= count else m.group(0)

    out, pos = [], 0
    for fence in FENCE.finditer(text):
        out.append(CITATION.sub(link, text[pos:fence.start()]))
        out.append(fence.group(0))
        pos = fence.end()
    out.append(CITATION.sub(link, text[pos:]))
    return "".join(out)


def excerpt(text: str, size: int = EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[:size].rsplit(" ", 1)[0] + "…"


class SourcesView(QWidget):
    """A reply's sources, folded behind ``Sources (N)``: each one's number, where it lies and the start of
    its passage, cited ones first, then the best matches for the question (the first ``SHOWN``, then a
    link that lists them all); a note says how passages were found when it matters (BM25 alone).

    Signals:
        opened(int): a source's number (its row was clicked).
    """

    opened = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent, objectName="sources")
        self.items: list[dict] = []
        self.all_shown = False
        self._reply = ""
        self.toggle = QToolButton(checkable=True, autoRaise=True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.toggle.setArrowType(Qt.RightArrow)
        self.toggle.toggled.connect(self._on_toggle_toggled)
        self.note = QLabel(objectName="sourcesNote", wordWrap=True, visible=False)
        self.list = QLabel(wordWrap=True, visible=False, objectName="sourcesList")
        self.list.setTextFormat(Qt.RichText)
        self.list.setTextInteractionFlags(Qt.TextBrowserInteraction)
        self.list.linkActivated.connect(self._on_list_link_activated)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.toggle, 0, Qt.AlignLeft)
        lay.addWidget(self.note)
        lay.addWidget(self.list)
        self.hide()

    def set_sources(self, sources: dict, reply: str = "") -> None:
        """Show ``sources`` (``{"items": [...], "note": str}``); ``reply`` is the text, for its citations."""
        self.items, self._reply = list(sources.get("items") or []), reply
        self.setVisible(bool(self.items))
        if not self.items:
            return
        order = cited(reply, max(s["n"] for s in self.items))
        by_n = {s["n"]: s for s in self.items}
        rest = sorted((s for s in self.items if s["n"] not in order), key=lambda s: (s.get("rank", s["n"]), s["n"]))
        rows = [by_n[n] for n in order if n in by_n] + rest
        hidden = 0 if self.all_shown else max(0, len(rows) - max(SHOWN, len(order)))
        lines = []
        for s in rows[:len(rows) - hidden]:
            mark = " <b>(cited)</b>" if s["n"] in order else ""
            lines.append(f'<p style="margin:2px 0;"><a href="source:{s["n"]}">[{s["n"]}] '
                         f'{html.escape(source_label(s))}</a>{mark}<br/>'
                         f'<span style="color:#888;">{html.escape(excerpt(s["text"]))}</span></p>')
        if hidden:
            lines.append(f'<p><a href="all">Show all {len(rows)} sources</a> (the whole document was given; '
                         'these match the question best)</p>')
        self.list.setText("".join(lines))
        count = len(self.items)
        note = sources.get("note") or ""
        self.toggle.setText(f"Sources ({count})" + (f" · {len(order)} cited" if order else "")
                            + (" · found by keywords" if "BM25" in note else ""))  # seen while folded too
        self.note.setText(note)
        self.note.setVisible(bool(note) and self.toggle.isChecked())

    def source(self, n: int) -> dict | None:
        return next((s for s in self.items if s["n"] == n), None)

    def open_list(self, shown: bool = True) -> None:
        self.toggle.setChecked(shown)

    @Slot(bool)
    def _on_toggle_toggled(self, shown: bool) -> None:
        self.list.setVisible(shown)
        self.note.setVisible(shown and bool(self.note.text()))
        self.toggle.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)

    @Slot(str)
    def _on_list_link_activated(self, link: str) -> None:
        if link.startswith("source:"):
            self.opened.emit(int(link.removeprefix("source:")))
        elif link == "all":
            self.all_shown = True
            self.set_sources({"items": self.items, "note": self.note.text()}, self._reply)


def how_found(source: dict) -> str:
    """How a source came to the reply, in words: given whole, or found by keywords alone (no embedder, or
    its vectors not made yet), or by keywords and by meaning."""
    if source.get("mode") == "whole":
        return "given whole: its document fitted the model's context"
    return {"bm25": "found by keywords alone (no embedder's vectors to search by meaning)",
            "fused": "found by keywords and by meaning",
            "vectors": "found by meaning"}.get(source.get("found_by", ""), "retrieved for the question")


class SourceDialog(QDialog):
    """One source in its context: the passage highlighted between the passages around it in its
    document, with where it lies (file, page, heading) as the title."""

    def __init__(self, source: dict, before: str, passage: str, after: str, problem: str = "",
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.source = source
        self.setWindowTitle(f"[{source['n']}] {source_label(source)}")
        how = how_found(source)
        self.where = QLabel(f"<b>[{source['n']}] {html.escape(source_label(source))}</b> · {how}", wordWrap=True)
        self.problem = QLabel(problem, wordWrap=True, visible=bool(problem), objectName="sourceProblem")
        self.text = QTextBrowser()
        grey = "color:#777;"
        parts = []
        if before:
            parts.append(f'<p style="{grey} white-space:pre-wrap;">{html.escape(before)}</p>')
        parts.append('<a name="passage"></a><p style="background-color:#fff3b0; color:#1e1e1e; '
                     f'white-space:pre-wrap;">{html.escape(passage)}</p>')
        if after:
            parts.append(f'<p style="{grey} white-space:pre-wrap;">{html.escape(after)}</p>')
        self.text.setHtml("".join(parts))
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.where)
        lay.addWidget(self.problem)
        lay.addWidget(self.text, 1)
        lay.addWidget(buttons)
        self.resize(640, 480)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.text.scrollToAnchor("passage")
        cursor = self.text.textCursor()
        cursor.movePosition(QTextCursor.Start)
        self.text.setTextCursor(cursor)
