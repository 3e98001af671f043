"""The Chat page: conversations on the left, the model bar and the transcript in the middle, the chat's
system prompt, sampling and tools on the right, and the composer with its context meter at the bottom.

The page lays out small widgets and renders a ``ChatSession`` (``session.py``), which owns the
conversation flow (send, stream, stop, regenerate, retry, edit, branches) and saves every streamed batch
before it is shown. The page hands the session what the user typed and the chat's settings, and
redraws the transcript, the buttons and the meter when the session says something changed. Helpers do
the rest: ``ChatSettings`` keeps each chat's settings and model with it (``chat_settings.py``), an
``Attacher`` takes what the user attaches (``attacher.py``), ``Viewers`` read and show a message's images
and sources (``viewers.py``), ``exporter.py`` writes a chat to a file, and an empty chat shows the
``Welcome`` (``welcome.py``).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QPushButton, QStackedWidget, QVBoxLayout, QWidget

from ..bridge import STARTER_ID
from ..context import AppContext
from .attacher import Attacher
from .chat_settings import ChatSettings
from .composer import ComposerBar, ContextMeter
from .conversations import ConversationList
from .exporter import ask_path, export_chat
from .picker import ChosenModel, ModelBar
from .session import ChatSession
from .settings_panel import ChatSettingsPanel
from .transcript import Transcript
from .viewers import Viewers
from .welcome import Welcome


class ChatPage(QWidget):
    """Chat with a local model.

    Signals:
        reply_started(int): reply message id.
        reply_shown(int, str): reply id, all of its text shown so far (after it was saved).
        reply_ended(int, str): reply id, its final state (``complete``, ``stopped`` or ``error``).
        undo_offered(str, object): a message and a callable that undoes what it describes.
        image_attached(object), image_refused(str), document_attached(object), document_refused(str):
            forwarded from its ``Attacher``: an image or a document waits in the composer, or was refused.
        image_viewed(str), source_shown(object): forwarded from its ``Viewers``: an image shown full
            size (its file name), a source's dialog opened (the ``SourceDialog``).
    """

    reply_started = Signal(int)
    reply_shown = Signal(int, str)
    reply_ended = Signal(int, str)
    undo_offered = Signal(str, object)
    image_attached = Signal(object)
    image_refused = Signal(str)
    image_viewed = Signal(str)
    document_attached = Signal(object)
    document_refused = Signal(str)
    source_shown = Signal(object)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx, self.store = ctx, ctx.store
        self._build()
        self.session = ChatSession(ctx.store, ctx.bridge, ctx.prefs, ChosenModel(self.model_bar.current, ctx.loader),
                                   ctx.tools, self)
        self.chat_settings = ChatSettings(ctx, self.settings_panel, self.model_bar, self.session, self)
        self._connect()
        if not self.store.read_only:  # saved images and documents no message names (a purged chat's, one never sent) go
            ctx.bridge.images.sweep_later(self.store.image_names())
            ctx.bridge.documents.sweep_later(self.store.document_names(), self.store.conversation_ids())
        self.transcript.warm_up()
        self.conversations.refresh()
        first = self.conversations.model.items[:1]
        self.open_conversation(first[0].id) if first else self.new_chat()

    @property
    def conv_id(self) -> int | None:
        return self.session.conv_id

    def dispose(self) -> None:
        """Called by the main window before the engine is torn down."""
        self.session.dispose()

    # --- layout ----------------------------------------------------------------------------------
    def _build(self) -> None:
        self.conversations = ConversationList(self.store)
        self.model_bar = ModelBar(self.ctx)
        self.settings_toggle = QPushButton("Chat settings", checkable=True, checked=True)
        self.settings_panel = ChatSettingsPanel()
        self.transcript = Transcript()
        self.empty = Welcome()
        self.ready, self.start_button = self.empty.ready, self.empty.start_button
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.transcript)
        self.bar = ComposerBar()
        self.composer, self.edit_banner = self.bar.composer, self.bar.edit_banner
        self.send_button, self.stop_button = self.bar.send_button, self.bar.stop_button
        self.meter = ContextMeter()
        self.attacher = Attacher(self.ctx.bridge, self.bar, self.transcript, self.model_bar.current, self)
        self.viewers = Viewers(self.ctx.bridge, self.transcript, self)
        top = QHBoxLayout()
        top.addWidget(self.model_bar, 1)
        top.addWidget(self.settings_toggle, 0, Qt.AlignTop)
        center = QVBoxLayout()
        center.setContentsMargins(10, 8, 10, 8)
        center.addLayout(top)
        center.addWidget(self.stack, 1)
        center.addWidget(self.bar)
        center.addWidget(self.meter, 0, Qt.AlignRight)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.conversations)
        lay.addLayout(center, 1)
        lay.addWidget(self.settings_panel)

    def _connect(self) -> None:
        c, s, t = self.conversations, self.session, self.transcript
        c.new_requested.connect(self.new_chat)
        c.selected.connect(self.open_conversation)
        c.delete_requested.connect(self.delete_conversation)
        c.export_requested.connect(self._on_conversations_export_requested)
        self.model_bar.model_chosen.connect(self._on_model_bar_model_chosen)
        self.ctx.loader.model_ready.connect(self._on_loader_model_ready)
        self.ctx.bridge.loaded_changed.connect(self.show_empty_state)
        s.thread_changed.connect(self._on_session_thread_changed)
        s.busy_changed.connect(self._on_session_busy_changed)
        s.message_grew.connect(self._on_session_message_grew)
        s.message_ended.connect(self._on_session_message_ended)
        s.prompt_counted.connect(self._on_session_prompt_counted)
        s.editing_changed.connect(self._on_session_editing_changed)
        s.tool_changed.connect(self._on_session_tool_changed)
        s.reply_started.connect(self.reply_started)
        s.reply_ended.connect(self.reply_ended)
        self.settings_toggle.toggled.connect(self.settings_panel.setVisible)
        t.edit_requested.connect(self.edit_message)
        t.regenerate_requested.connect(self.regenerate)
        t.branch_requested.connect(self.flip_branch)
        t.retry_requested.connect(self.retry)
        t.tool_decided.connect(self._on_transcript_tool_decided)
        self.viewers.image_viewed.connect(self.image_viewed)
        self.viewers.source_shown.connect(self.source_shown)
        self.attacher.image_attached.connect(self.image_attached)
        self.attacher.image_refused.connect(self.image_refused)
        self.attacher.document_attached.connect(self.document_attached)
        self.attacher.document_refused.connect(self.document_refused)
        self.empty.start_requested.connect(self._on_empty_start_requested)
        self.bar.send_requested.connect(self.send)
        self.bar.cancel_requested.connect(self._cancel_edit)
        self.bar.stop_requested.connect(self.stop)

    # --- conversations ---------------------------------------------------------------------------
    @Slot()
    def new_chat(self) -> None:
        self.chat_settings.show(None)
        self.conversations.view.clearSelection()
        self.session.new_chat()
        self.composer.setFocus()

    @Slot(int)
    def open_conversation(self, conv_id: int) -> None:
        conv = self.session.open(conv_id)
        if conv is None:
            return self.new_chat()
        self.chat_settings.show(conv)
        self.conversations.refresh(select=conv_id)
        self._show_thread()

    @Slot(int)
    def delete_conversation(self, conv_id: int) -> None:
        title = self.store.conversation(conv_id).title
        self.store.delete_conversation(conv_id)
        self.ctx.bridge.forget_chat(conv_id)  # its saved KV states in the prompt cache
        self.conversations.refresh()
        if conv_id == self.conv_id:
            self.new_chat()
        self.undo_offered.emit(f"Deleted “{title}”", lambda: self._restore(conv_id))

    def _restore(self, conv_id: int) -> None:
        self.store.restore_conversation(conv_id)
        self.open_conversation(conv_id)

    def export(self, conv_id: int, kind: str, path: Path) -> None:
        """Write chat ``conv_id`` to ``path`` as ``markdown`` or ``json`` (``exporter.py``)."""
        export_chat(self.ctx, conv_id, kind, path)

    @Slot(int, str)
    def _on_conversations_export_requested(self, conv_id: int, kind: str) -> None:
        path = ask_path(self, self.store.conversation(conv_id).title, kind)
        if path is not None:
            self.export(conv_id, kind, path)

    # --- what the user does (the session decides) ------------------------------------------------
    @Slot()
    def send(self) -> None:
        system_prompt, sampling = self.settings_panel.values()
        waiting = self.attacher.waiting()
        if waiting is None:
            return
        if self.session.send(self.bar.text(), system_prompt, sampling, self.settings_panel.tools(), *waiting):
            self.composer.clear()
            self.bar.clear_attachments()
            self.conversations.refresh(select=self.conv_id)

    def _ensure_conversation(self, text: str, model_id: str) -> int:
        return self.session.ensure_conversation(text, model_id, *self.settings_panel.values(),
                                                self.settings_panel.tools())

    @Slot()
    def stop(self) -> None:
        self.session.stop()

    @Slot(int)
    def regenerate(self, reply_id: int) -> None:
        self.session.regenerate(reply_id)

    @Slot(int)
    def retry(self, message_id: int) -> None:
        self.session.retry(message_id)

    @Slot(int)
    def edit_message(self, message_id: int) -> None:
        self.session.start_edit(message_id)

    @Slot()
    def _cancel_edit(self) -> None:
        self.session.cancel_edit()
        self.bar.show_edit(None)

    @Slot(int, int)
    def flip_branch(self, message_id: int, step: int) -> None:
        self.session.flip_branch(message_id, step)

    # --- what the session says -------------------------------------------------------------------
    @Slot()
    def _on_session_thread_changed(self) -> None:
        self._show_thread()

    @Slot(bool)
    def _on_session_busy_changed(self, busy: bool) -> None:
        self.bar.set_busy(busy)
        self.transcript.set_busy(busy)
        self.transcript.offer_retry(self.session.unanswered())

    @Slot(object)
    def _on_session_message_grew(self, msg) -> None:
        self.transcript.grow(msg)
        self.reply_shown.emit(msg.id, msg.content)

    @Slot(object)
    def _on_session_message_ended(self, msg) -> None:
        self.transcript.end(msg)
        self._update_meter(msg.stats)

    @Slot(int)
    def _on_session_prompt_counted(self, tokens: int) -> None:
        self._update_meter({"prompt_tokens": tokens})  # the reply's own tokens join it when it ends

    @Slot(object)
    def _on_session_editing_changed(self, msg) -> None:
        self.bar.show_edit(msg.content if msg is not None else None)
        self.attacher.bring_back(msg)

    @Slot(object)
    def _on_session_tool_changed(self, msg) -> None:
        if not self.transcript.update_tool(msg):
            self._show_thread()

    @Slot(int, str)
    def _on_transcript_tool_decided(self, message_id: int, decision: str) -> None:
        self.session.decide(message_id, decision)

    @Slot()
    def list_collections(self) -> None:
        """List the knowledge collections a chat can tick again (the Knowledge page made or deleted one)."""
        self.chat_settings.list_collections()

    @Slot(str)
    def _on_loader_model_ready(self, model_id: str) -> None:
        self._update_meter()
        self.session.model_ready(model_id)
        self.show_empty_state()

    @Slot()
    def show_empty_state(self) -> None:
        """The empty chat offers the built-in model only while no chat model is loaded; once one is, it
        says which one the next message goes to."""
        loaded = [m.model_id for m in self.ctx.engine.loaded() if not m.embedding]  # a quick, locked read
        self.empty.show_loaded(loaded, self.model_bar.current())

    # --- helpers ---------------------------------------------------------------------------------
    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:  # a theme switch: code blocks follow the new scheme
            self.transcript.restyle()

    def _show_thread(self) -> None:
        messages, branches = self.session.thread()
        self.transcript.show_thread(messages, branches)
        self.transcript.set_busy(self.session.busy)
        self.transcript.offer_retry(self.session.unanswered())
        self.stack.setCurrentWidget(self.transcript if messages else self.empty)
        if not messages:
            self.show_empty_state()
        if not messages or self.session.active is None:
            self._update_meter()

    def _update_meter(self, stats: dict | None = None) -> None:
        stats = self.session.last_stats() if stats is None else stats
        used = int(stats.get("prompt_tokens", 0)) + int(stats.get("completion_tokens", 0))
        self.meter.show_usage(used, self.model_bar.context_size(self.model_bar.current()))

    @Slot()
    def _on_empty_start_requested(self) -> None:
        self.new_chat()
        self.model_bar.set_model(STARTER_ID)
        self.ctx.loader.ensure_loaded(STARTER_ID)
        self.composer.setFocus()

    @Slot(str)
    def _on_model_bar_model_chosen(self, _model_id: str) -> None:
        self._update_meter()  # (the chat's settings keep the choice: ``ChatSettings``, connected first)
