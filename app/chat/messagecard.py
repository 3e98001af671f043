"""One message card in the transcript: ``MessageView``.

It shows who spoke, the text rendered as Markdown (code highlighted, with a copy link per block), the
reasoning folded behind "Thought for N s", the reply's stats (``format_stats``), and the actions a
message offers: copy, edit (yours), regenerate (the model's), retry (a reply that failed, or your last
message when it got no reply) and a ``‹ 2/3 ›`` switcher when a message has branches. A reply grounded
in documents lists its sources under its text (``sources.py``), its ``[n]`` markers linked to them; your
message names the documents you attached and shows its images' thumbnails (``pictures.py``). The card
only asks for things (its signals); ``Transcript`` (``transcript.py``) forwards them to the page.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QGuiApplication, QPalette
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.fmt import draft_share

from ..store import Message
from .markdown import plain, render
from .pictures import Thumbnails
from .sources import SourcesView, link_citations


def is_dark() -> bool:
    return QGuiApplication.palette().color(QPalette.Window).lightness() < 128


def format_stats(stats: dict) -> str:
    """``12.3 tok/s · 0.42 s to first token · 64 tokens · stop``: what a reply cost."""
    if not stats:
        return ""
    parts = []
    if stats.get("decode_tokens_per_s"):
        parts.append(f"{stats['decode_tokens_per_s']:.1f} tok/s")
    if stats.get("ttft_s"):
        parts.append(f"{stats['ttft_s']:.2f} s to first token")
    if stats.get("restored_tokens"):
        parts.append(f"resumed {stats['restored_tokens']:,} tokens from cache")
    if "completion_tokens" in stats:
        parts.append(f"{stats['completion_tokens']} tokens")
    if stats.get("draft_tokens"):
        parts.append(draft_share(stats["draft_tokens"], stats.get("accepted_draft_tokens", 0)))
    if stats.get("finish_reason") and stats["finish_reason"] != "stop":
        parts.append({"length": "hit the token limit", "cancelled": "stopped"}.get(
            stats["finish_reason"], stats["finish_reason"]))
    if stats.get("tool_step_limit"):
        parts.append(f"answered without tools at the step limit ({stats['tool_step_limit']})")
    return " · ".join(parts)


class _Body(QTextBrowser):
    """A text browser as tall as its text (the transcript scrolls, not each message)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setFrameShape(QFrame.NoFrame)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)
        self.viewport().setAutoFillBackground(False)
        self.document().documentLayout().documentSizeChanged.connect(self._on_document_resized)

    @Slot()
    def _on_document_resized(self, *_args) -> None:
        self.setFixedHeight(int(self.document().size().height()) + 4)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.document().setTextWidth(self.viewport().width())
        self._on_document_resized()

    def sizeHint(self) -> QSize:
        return QSize(400, int(self.document().size().height()) + 4)


class MessageView(QFrame):
    """One message card.

    Signals:
        edit_requested(int): message id.
        regenerate_requested(int): message id (a reply).
        branch_requested(int, int): message id, step (-1 previous branch, +1 next).
        retry_requested(int): message id (a failed reply, or your message that got none).
        image_opened(str): the file name of one of its images (its thumbnail was clicked).
        source_opened(int, int): message id, a source's number (a ``[n]`` or a source row was clicked).
    """

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    branch_requested = Signal(int, int)
    retry_requested = Signal(int)
    image_opened = Signal(str)
    source_opened = Signal(int, int)

    def __init__(self, message: Message, branch: tuple[int, int], parent: QWidget | None = None):
        super().__init__(parent)
        self.message = message
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        self.code_blocks: list[str] = []
        self._build(branch)
        self.set_content(message.content, message.reasoning, message.reasoning_s)
        self.set_stats(message.stats, message.state)
        if message.sources:
            self.set_sources(message.sources)

    def _build(self, branch: tuple[int, int]) -> None:
        who = "You" if self.message.role == "user" else (self.message.model_id or "Assistant")
        self.who = QLabel(f"<b>{who}</b>", wordWrap=True)
        self.thought = QToolButton(checkable=True, visible=False)
        self.thought.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.thought.setArrowType(Qt.RightArrow)
        self.thought.toggled.connect(self._on_thought_toggled)
        self.reasoning = QLabel(wordWrap=True, visible=False, objectName="reasoning")
        self.reasoning.setTextFormat(Qt.PlainText)  # the model's words: a tag in them is text, not markup
        self.reasoning.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.body = _Body(self)
        self.body.anchorClicked.connect(self._on_body_anchor_clicked)
        # The stats line wraps (it can be longer than a narrow window is wide): a label that does not
        # would set the card's minimum width and push Edit and Regenerate past the right edge.
        self.stats = QLabel(objectName="stats", wordWrap=True)
        self.stats.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 8)
        lay.addWidget(self.who)
        lay.addWidget(self.thought)
        lay.addWidget(self.reasoning)
        self.pictures = Thumbnails(self.message.images) if self.message.images else None
        if self.pictures is not None:
            self.pictures.opened.connect(self.image_opened)
            lay.addWidget(self.pictures)
        if self.message.documents:
            names = "Attached: " + ", ".join(f"{d['file']}" + (f" ({d['pages']} pages)" if d.get("pages") else "")
                                             for d in self.message.documents)
            self.documents = QLabel(names, wordWrap=True, objectName="messageDocuments")
            self.documents.setTextFormat(Qt.PlainText)
            lay.addWidget(self.documents)
        lay.addWidget(self.body)
        self.sources = SourcesView()
        self.sources.opened.connect(self._on_sources_opened)
        lay.addWidget(self.sources)
        lay.addLayout(self._actions(branch))

    def _actions(self, branch: tuple[int, int]) -> QHBoxLayout:
        row = QHBoxLayout()
        self._branch = branch
        index, count = branch
        self.prev_branch = self._button("‹", "Previous version", lambda: self.branch_requested.emit(self.message.id, -1))
        self.branch_label = QLabel(f"{index + 1}/{count}")
        self.next_branch = self._button("›", "Next version", lambda: self.branch_requested.emit(self.message.id, 1))
        for w in (self.prev_branch, self.branch_label, self.next_branch):
            w.setVisible(count > 1)
            row.addWidget(w)
        self.prev_branch.setEnabled(index > 0)
        self.next_branch.setEnabled(index < count - 1)
        row.addWidget(self.stats, 1)
        self.copy_button = self._button("Copy", "Copy this message", self._on_copy_clicked)
        row.addWidget(self.copy_button)
        if self.message.role == "user":
            self.edit_button = self._button("Edit", "Edit and resend as a new branch",
                                            lambda: self.edit_requested.emit(self.message.id))
            row.addWidget(self.edit_button)
        else:
            self.regenerate_button = self._button("Regenerate", "Write another reply (kept as a branch)",
                                                  lambda: self.regenerate_requested.emit(self.message.id))
            row.addWidget(self.regenerate_button)
        self.retry_button = self._button("Retry", "Send this message again", self._on_retry_clicked)
        self.retry_button.setObjectName("retry")
        self.retry_button.hide()
        row.addWidget(self.retry_button)
        return row

    def _button(self, text: str, tip: str, on_click) -> QToolButton:
        button = QToolButton(text=text, toolTip=tip, autoRaise=True)
        button.clicked.connect(on_click)
        return button

    def set_content(self, content: str, reasoning: str = "", reasoning_s: float | None = None) -> None:
        self.message.content, self.message.reasoning = content, reasoning
        shown = content if content or self.message.role == "user" else "…"
        self.body.setVisible(bool(shown) or not self.message.images)  # an image sent alone: no empty box
        count = len(self.message.sources.get("items") or []) if self.message.sources else 0
        rendered = plain(shown) if self.message.role == "user" else render(link_citations(shown, count), is_dark())
        self.code_blocks = rendered.code_blocks
        self.body.setHtml(rendered.html)
        self.thought.setVisible(bool(reasoning))
        if reasoning:
            self.reasoning.setText(reasoning)
            done = reasoning_s is not None
            self.thought.setText(f"Thought for {reasoning_s:.0f} s" if done else "Thinking…")
        if self.message.sources:
            self.sources.set_sources(self.message.sources, content)

    def set_sources(self, sources: dict) -> None:
        """The sources this reply was given; its ``[n]`` markers become links to them."""
        self.message.sources = sources
        self.set_content(self.message.content, self.message.reasoning, self.message.reasoning_s)

    def set_stats(self, stats: dict, state: str) -> None:
        self.message.stats, self.message.state = stats, state
        text = format_stats(stats)
        if state == "error":
            text = "the reply failed" + (f" · {text}" if text else "")
        self.stats.setText(text)
        if self.message.role == "assistant":
            self.retry_button.setVisible(state == "error")

    def set_unanswered(self, unanswered: bool) -> None:
        """Your last message, left without a reply (its model failed to load): offer to send it again."""
        self.retry_button.setVisible(unanswered)
        self.stats.setText("no reply: Retry sends it again" if unanswered else "")

    def set_busy(self, busy: bool) -> None:
        for name in ("edit_button", "regenerate_button", "retry_button", "prev_branch", "next_branch"):
            if hasattr(self, name):
                getattr(self, name).setEnabled(not busy and self._can(name))

    def _can(self, name: str) -> bool:
        index, count = self._branch
        return {"prev_branch": index > 0, "next_branch": index < count - 1}.get(name, True)

    @Slot(bool)
    def _on_thought_toggled(self, shown: bool) -> None:
        self.reasoning.setVisible(shown)
        self.thought.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)

    @Slot()
    def _on_retry_clicked(self) -> None:
        self.retry_requested.emit(self.message.id)

    @Slot()
    def _on_copy_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.message.content)

    @Slot(QUrl)
    def _on_body_anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == "copy":
            index = int(url.path() or 0)
            if 0 <= index < len(self.code_blocks):
                QGuiApplication.clipboard().setText(self.code_blocks[index])
        elif url.scheme() == "source":
            self._on_sources_opened(int(url.path() or 0))
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)

    @Slot(int)
    def _on_sources_opened(self, n: int) -> None:
        if self.sources.source(n) is not None:
            self.source_opened.emit(self.message.id, n)
