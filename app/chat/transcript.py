"""The messages of one conversation, as a scrolling column of message cards.

Each message is a ``MessageView`` (``messagecard.py``): its text as Markdown, its reasoning, stats,
sources and actions. A tool call is a ``ToolCallView`` (``toolcard.py``) instead, and the model's reply
that only made calls has no card of its own: its calls are the cards. ``Transcript`` lays the cards out,
keeps a card whose message has not changed (building one renders its Markdown), forwards what the cards
ask for, and keeps the view pinned to the bottom while a reply streams, unless the user has scrolled up
to read.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from ..store import Message
from .messagecard import MessageView
from .toolcard import ToolCallView


class Transcript(QScrollArea):
    """The column of message cards for the thread on show.

    Signals:
        edit_requested(int), regenerate_requested(int), branch_requested(int, int), retry_requested(int):
            forwarded from cards.
        tool_decided(int, str): forwarded from a tool call's card: message id, the user's answer.
        image_opened(str): forwarded from a card: an image's file name, to show full size.
        source_opened(int, int): forwarded from a card: message id, the number of a source to show.
        thumbnails_wanted(list): file names of images on show whose thumbnails are not here yet (the
            page has them read and hands them to ``add_thumbnails``).
    """

    edit_requested = Signal(int)
    regenerate_requested = Signal(int)
    branch_requested = Signal(int, int)
    retry_requested = Signal(int)
    tool_decided = Signal(int, str)
    image_opened = Signal(str)
    source_opened = Signal(int, int)
    thumbnails_wanted = Signal(list)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.NoFrame)
        inner = QWidget(objectName="transcript")
        self.column = QVBoxLayout(inner)
        self.column.setContentsMargins(24, 16, 24, 16)
        self.column.setSpacing(10)
        self.column.addStretch(1)
        self.setWidget(inner)
        self.views: dict[int, MessageView | ToolCallView] = {}
        self.thumbnails: dict[str, QImage] = {}
        self.verticalScrollBar().rangeChanged.connect(self._on_range_changed)
        self._pinned = True

    def show_thread(self, messages: list[Message], branches: dict[int, tuple[int, int]]) -> None:
        """Show ``messages`` (a thread, first to last). A card already showing a message exactly as it
        is (same content, state, stats and branch) is kept: building one renders its Markdown, and
        building every card again on each Send froze the window for 150 ms by the eighth turn."""
        wanted = [(msg, branches.get(msg.id, (0, 1))) for msg in messages
                  if not (msg.role == "assistant" and msg.tool.get("calls") and not msg.content.strip())]
        # (a reply that only made calls is left out: its calls' cards say it all)
        old, self.views = self.views, {}
        kept = {msg.id: old[msg.id] for msg, branch in wanted if _shows(old.get(msg.id), msg, branch)}
        for message_id, view in old.items():
            if kept.get(message_id) is not view:
                self.column.removeWidget(view)
                view.setParent(None)
                view.deleteLater()
        for i, (msg, branch) in enumerate(wanted):  # the stretch stays last
            view = kept.get(msg.id)
            if view is None:
                view = self._card(msg, branch)
                self.column.insertWidget(i, view)
            elif self.column.indexOf(view) != i:
                self.column.removeWidget(view)
                self.column.insertWidget(i, view)
            self.views[msg.id] = view
        self._pinned = True

    def _card(self, msg: Message, branch: tuple[int, int]) -> MessageView | ToolCallView:
        if msg.role == "tool":
            card = ToolCallView(msg)
            card.decided.connect(self.tool_decided)
            return card
        view = MessageView(msg, branch)
        view.edit_requested.connect(self.edit_requested)
        view.regenerate_requested.connect(self.regenerate_requested)
        view.branch_requested.connect(self.branch_requested)
        view.retry_requested.connect(self.retry_requested)
        view.source_opened.connect(self.source_opened)
        if view.pictures is not None:
            view.image_opened.connect(self.image_opened)
            view.pictures.show_thumbnails(self.thumbnails)
            missing = [name for name in msg.images if name not in self.thumbnails]
            if missing:
                self.thumbnails_wanted.emit(missing)
        return view

    def add_thumbnails(self, found: dict[str, QImage]) -> None:
        """Thumbnails read from disk (or made when the image was attached): shown wherever they belong."""
        self.thumbnails.update(found)
        for view in self.views.values():
            if isinstance(view, MessageView) and view.pictures is not None:
                view.pictures.show_thumbnails(found)

    def restyle(self) -> None:
        """Render the message cards again (the theme changed: code blocks follow the new scheme)."""
        for view in self.views.values():
            if isinstance(view, MessageView):
                view.set_content(view.message.content, view.message.reasoning, view.message.reasoning_s)

    def warm_up(self) -> None:
        """Build and drop one card: the first one pays PySide's lazy type set-up (~0.2 s), which
        belongs in start-up, not in the user's first Send."""
        card = MessageView(Message(0, 0, None, "assistant", "**warm**", "complete", None, 0.0), (0, 1))
        card.set_content("warm `up`\n\n```python\nx = 1\n```\n```nosuchlanguage\ny\n```")
        card.deleteLater()

    def offer_retry(self, message_id: int | None) -> None:
        """Show Retry on your message ``message_id`` (it got no reply); None takes every such offer back."""
        for view in self.views.values():
            if view.message.role == "user":
                view.set_unanswered(view.message.id == message_id)

    def view(self, message_id: int) -> MessageView | ToolCallView | None:
        return self.views.get(message_id)

    def grow(self, msg: Message) -> None:
        """``msg`` (a reply streaming) has more text, or its sources: its card shows them."""
        view = self.views.get(msg.id)
        if view is not None:
            self.before_update()
            if msg.sources and getattr(view.message, "sources", None) != msg.sources:
                view.message.sources = msg.sources
            view.set_content(msg.content, msg.reasoning, msg.reasoning_s)

    def end(self, msg: Message) -> None:
        """``msg`` ended: its card shows its final state and stats."""
        view = self.views.get(msg.id)
        if view is not None:
            view.set_stats(msg.stats, msg.state)

    def update_tool(self, msg: Message) -> bool:
        """Show tool call ``msg``'s new state on its card; False when it has no card yet (the thread is
        to be shown again)."""
        view = self.views.get(msg.id)
        if not isinstance(view, ToolCallView):
            return False
        self.before_update()
        view.set_message(msg)
        return True

    def set_busy(self, busy: bool) -> None:
        for view in self.views.values():
            view.set_busy(busy)

    def before_update(self) -> None:
        """Call before growing a message: stay pinned to the bottom only if the user was there."""
        bar = self.verticalScrollBar()
        self._pinned = bar.value() >= bar.maximum() - 8

    @Slot(int, int)
    def _on_range_changed(self, _low: int, high: int) -> None:
        if self._pinned:
            self.verticalScrollBar().setValue(high)


def _shows(view: MessageView | ToolCallView | None, msg: Message, branch: tuple[int, int]) -> bool:
    """Whether ``view`` already shows ``msg`` as it is now, in ``branch``."""
    if isinstance(view, MessageView):
        return view.message == msg and view._branch == branch
    return isinstance(view, ToolCallView) and view.message == msg
