"""The Chat page: conversations on the left, the model bar and the transcript in the middle, the chat's
system prompt and sampling on the right, and the composer with its context meter at the bottom.

The page owns the conversation flow. Sending adds your message to the store, then starts a reply: an
empty assistant message is stored as ``streaming`` and the bridge streams into it; each batch of text
is written to the store *before* it is shown, so a crash never loses text the user saw. Stop sets the
reply's cancel event; Regenerate adds a sibling reply; editing a message adds a sibling question and
a fresh reply, and the ``‹ n/m ›`` switchers flip between those branches. A model that is not loaded
yet is loaded (with progress) first and the reply starts when it is ready. A reply that failed, or a
message left unanswered because its model did not load, offers Retry, which sends it again.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.library.starter import STARTER_ID, starter_path
from fireside.engine.runtime.types import ChatRequest

from .. import export
from ..context import AppContext
from ..feedback import show_error
from ..store import Message
from .chat_settings import DEFAULT_SAMPLING, ChatSettingsPanel, to_sampling
from .conversations import ConversationList
from .picker import ModelBar
from .prompt_cache import forget_chat, tag_for
from .transcript import Transcript

CONTEXT_WARN = 0.85


class Composer(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter starts a new line, Escape cancels an edit.

    Signals:
        submitted(): Enter was pressed.
        cancelled(): Escape was pressed.
    """

    submitted = Signal()
    cancelled = Signal()

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not event.modifiers() & Qt.ShiftModifier:
            self.submitted.emit()
        elif event.key() == Qt.Key_Escape:
            self.cancelled.emit()
        else:
            super().keyPressEvent(event)


class ChatPage(QWidget):
    """Chat with a local model.

    Signals:
        reply_started(int): reply message id.
        reply_shown(int, str): reply id, all of its text shown so far (after it was saved).
        reply_ended(int, str): reply id, its final state (``complete``, ``stopped`` or ``error``).
        undo_offered(str, object): a message and a callable that undoes what it describes.
    """

    reply_started = Signal(int)
    reply_shown = Signal(int, str)
    reply_ended = Signal(int, str)
    undo_offered = Signal(str, object)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx, self.store = ctx, ctx.store
        self.conv_id: int | None = None
        self.active: Message | None = None
        self.pending_parent: Message | None = None
        self.editing: Message | None = None
        self._reasoning_t: list[float] = []
        self._build()
        self._connect()
        self.transcript.warm_up()
        self.conversations.refresh()
        first = self.conversations.model.items[:1]
        self.open_conversation(first[0].id) if first else self.new_chat()

    # --- layout ----------------------------------------------------------------------------------
    def _build(self) -> None:
        self.conversations = ConversationList(self.store)
        self.model_bar = ModelBar(self.ctx)
        self.settings_toggle = QPushButton("Chat settings", checkable=True, checked=True)
        self.settings_panel = ChatSettingsPanel()
        self.transcript = Transcript()
        self.empty = self._empty_state()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.transcript)
        self.edit_banner = QLabel(visible=False, objectName="editBanner")
        self.composer = Composer(placeholderText="Message the model (Enter sends, Shift+Enter for a new line)")
        self.composer.setMaximumHeight(110)
        self.send_button = QPushButton("Send", objectName="primary")
        self.stop_button = QPushButton("Stop", visible=False, objectName="danger")
        self.meter = QProgressBar(objectName="contextMeter", minimumWidth=240, maximumWidth=320, textVisible=True)
        self.meter.setFormat("context: not loaded")
        self.meter.setValue(0)
        top = QHBoxLayout()
        top.addWidget(self.model_bar, 1)
        top.addWidget(self.settings_toggle, 0, Qt.AlignTop)
        bottom = QHBoxLayout()
        bottom.addWidget(self.composer, 1)
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        bottom.addLayout(buttons)
        center = QVBoxLayout()
        center.setContentsMargins(10, 8, 10, 8)
        center.addLayout(top)
        center.addWidget(self.stack, 1)
        center.addWidget(self.edit_banner)
        center.addLayout(bottom)
        center.addWidget(self.meter, 0, Qt.AlignRight)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.conversations)
        lay.addLayout(center, 1)
        lay.addWidget(self.settings_panel)

    def _empty_state(self) -> QWidget:
        box = QWidget(objectName="emptyState")
        title = QLabel("<h2>Chat with a model on your own machine</h2>", alignment=Qt.AlignCenter, wordWrap=True)
        hint = QLabel("Nothing you type leaves this computer.", alignment=Qt.AlignCenter)
        self.start_button = QPushButton("Start chatting with SmolLM2 (built in)", objectName="primary")
        self.start_button.setVisible(starter_path() is not None)
        self.start_button.clicked.connect(self._on_start_clicked)
        lay = QVBoxLayout(box)
        lay.addStretch(1)
        for w in (title, hint):
            lay.addWidget(w)
        lay.addWidget(self.start_button, 0, Qt.AlignCenter)
        lay.addStretch(2)
        return box

    def _connect(self) -> None:
        c, b = self.conversations, self.ctx.bridge
        c.new_requested.connect(self.new_chat)
        c.selected.connect(self.open_conversation)
        c.delete_requested.connect(self.delete_conversation)
        c.export_requested.connect(self._on_conversations_export_requested)
        self.model_bar.model_chosen.connect(self._on_model_bar_model_chosen)
        self.model_bar.model_ready.connect(self._on_model_bar_model_ready)
        b.load_failed.connect(self._on_bridge_load_failed)
        b.reply_text.connect(self._on_bridge_reply_text)
        b.reply_finished.connect(self._on_bridge_reply_finished)
        b.reply_failed.connect(self._on_bridge_reply_failed)
        self.settings_toggle.toggled.connect(self.settings_panel.setVisible)
        self.settings_panel.changed.connect(self._on_settings_panel_changed)
        self.transcript.edit_requested.connect(self.edit_message)
        self.transcript.regenerate_requested.connect(self.regenerate)
        self.transcript.branch_requested.connect(self.flip_branch)
        self.transcript.retry_requested.connect(self.retry)
        self.composer.submitted.connect(self.send)
        self.composer.cancelled.connect(self._cancel_edit)
        self.send_button.clicked.connect(self.send)
        self.stop_button.clicked.connect(self.stop)

    # --- conversations ---------------------------------------------------------------------------
    @Slot()
    def new_chat(self) -> None:
        self.conv_id = None
        self._cancel_edit()
        self.settings_panel.set_values("", DEFAULT_SAMPLING)
        self.model_bar.set_model(self.ctx.prefs.get("last_model") or (STARTER_ID if starter_path() else None))
        self.conversations.view.clearSelection()
        self._show_thread()
        self.composer.setFocus()

    @Slot(int)
    def open_conversation(self, conv_id: int) -> None:
        try:
            conv = self.store.conversation(conv_id)
        except KeyError:
            return self.new_chat()
        self.conv_id = conv_id
        self._cancel_edit()
        self.settings_panel.set_values(conv.system_prompt, conv.sampling)
        self.model_bar.set_model(conv.model_id or self.ctx.prefs.get("last_model"))
        self.conversations.refresh(select=conv_id)
        self._show_thread()

    @Slot(int)
    def delete_conversation(self, conv_id: int) -> None:
        title = self.store.conversation(conv_id).title
        self.store.delete_conversation(conv_id)
        forget_chat(self.ctx, conv_id)  # its saved KV states (an undone delete only evaluates its history again)
        self.conversations.refresh()
        if conv_id == self.conv_id:
            self.new_chat()
        self.undo_offered.emit(f"Deleted “{title}”", lambda: self._restore(conv_id))

    def _restore(self, conv_id: int) -> None:
        self.store.restore_conversation(conv_id)
        self.open_conversation(conv_id)

    def export(self, conv_id: int, kind: str, path: Path) -> None:
        text = export.to_markdown(self.store, conv_id) if kind == "markdown" else export.to_json(self.store, conv_id)
        self.ctx.tasks.run_in_background(lambda: export.save(path, text),  # atomic: a crash keeps the old file
                                         lambda _r, e: e and show_error(e, f"exporting to {path}"))

    @Slot(int, str)
    def _on_conversations_export_requested(self, conv_id: int, kind: str) -> None:
        suffix = ".md" if kind == "markdown" else ".json"
        name = self.store.conversation(conv_id).title.replace("/", "-")[:60] + suffix
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", str(Path.home() / name))
        if path:
            self.export(conv_id, kind, Path(path))

    # --- sending ---------------------------------------------------------------------------------
    @Slot()
    def send(self) -> None:
        text = self.composer.toPlainText().strip()
        model_id = self.model_bar.current()
        if not text or self.active is not None or self.pending_parent is not None:
            return
        if not model_id:
            show_error("Choose a model first (the model bar above the chat)")
            return
        conv_id = self._ensure_conversation(text, model_id)
        thread = self.store.thread(conv_id)
        parent = self.editing.parent_id if self.editing else (thread[-1].id if thread else None)
        user = self.store.add_message(conv_id, parent, "user", text)
        self.composer.clear()
        self._cancel_edit()
        self.conversations.refresh(select=conv_id)
        self._reply_to(user)

    def _ensure_conversation(self, text: str, model_id: str) -> int:
        system_prompt, sampling = self.settings_panel.values()
        if not system_prompt.strip():  # a new chat starts from the model's default system prompt, if any
            system_prompt = ((self.ctx.prefs.get("model_defaults") or {}).get(model_id) or {}).get("system_prompt", "")
        if self.conv_id is None:
            title = " ".join(text.split())[:48] or "New chat"
            self.conv_id = self.store.create_conversation(title, model_id, system_prompt, sampling).id
        else:
            self.store.update_conversation(self.conv_id, model_id=model_id)
        self.ctx.prefs.set("last_model", model_id)
        return self.conv_id

    def _reply_to(self, user: Message) -> None:
        """Answer ``user`` (which must be the current leaf), loading the model first if needed."""
        model_id = self.model_bar.current()
        self._show_thread()
        if not self.model_bar.ensure_loaded(model_id):
            self.pending_parent = user
            self._set_busy(True)
            return
        self._start_reply(user, model_id)

    def _start_reply(self, user: Message, model_id: str) -> None:
        conv = self.store.conversation(user.conversation_id)
        messages = [{"role": m.role, "content": m.content} for m in self.store.thread(conv.id)
                    if m.content and m.state != "error"]
        if conv.system_prompt.strip():
            messages.insert(0, {"role": "system", "content": conv.system_prompt})
        self.active = self.store.add_message(conv.id, user.id, "assistant", "", "streaming", model_id)
        self._reasoning_t = []
        self._show_thread()
        self._set_busy(True)
        self.ctx.bridge.chat(self.active.id, model_id, ChatRequest(messages=messages, sampling=to_sampling(conv.sampling),
                                                                   cache_tag=tag_for(conv.id)))
        self.reply_started.emit(self.active.id)

    @Slot()
    def stop(self) -> None:
        if self.active is not None:
            self.ctx.bridge.stop(self.active.id)
        elif self.pending_parent is not None:
            self.ctx.bridge.cancel_load(self.model_bar.current() or "")

    @Slot(int)
    def regenerate(self, reply_id: int) -> None:
        reply = self.store.message(reply_id)
        if self.active is not None or reply.parent_id is None:
            return
        user = self.store.message(reply.parent_id)
        self.store.switch_branch(user.id)
        self.store.update_conversation(user.conversation_id, leaf_id=user.id)
        self._reply_to(user)

    @Slot(int)
    def retry(self, message_id: int) -> None:
        """Send again: a failed reply is regenerated; your unanswered last message gets its reply."""
        msg = self.store.message(message_id)
        if msg.role == "assistant":
            return self.regenerate(message_id)
        if self.active is not None or self.pending_parent is not None or not self.model_bar.current():
            return
        thread = self.store.thread(msg.conversation_id)
        if thread and thread[-1].id == msg.id:
            self._reply_to(msg)

    @Slot(int)
    def edit_message(self, message_id: int) -> None:
        if self.active is not None:
            return
        self.editing = self.store.message(message_id)
        self.composer.setPlainText(self.editing.content)
        self.edit_banner.setText("Editing a message: Send keeps the earlier version as a branch (Esc cancels)")
        self.edit_banner.show()
        self.composer.setFocus()

    @Slot()
    def _cancel_edit(self) -> None:
        if self.editing is not None:
            self.composer.clear()
        self.editing = None
        self.edit_banner.hide()

    @Slot(int, int)
    def flip_branch(self, message_id: int, step: int) -> None:
        if self.active is not None:
            return
        siblings = self.store.siblings(self.store.message(message_id))
        index = siblings.index(message_id) + step
        if 0 <= index < len(siblings):
            self.store.switch_branch(siblings[index])
            self._show_thread()

    # --- engine events ---------------------------------------------------------------------------
    @Slot(str)
    def _on_model_bar_model_ready(self, model_id: str) -> None:
        self._update_meter()
        parent, self.pending_parent = self.pending_parent, None
        if parent is not None and model_id == self.model_bar.current():
            self._start_reply(parent, model_id)
        elif parent is not None:
            self._set_busy(False)

    @Slot(str, object)
    def _on_bridge_load_failed(self, _model_id: str, _error) -> None:
        if self.pending_parent is not None:  # the load's own error is shown by the model bar
            self.pending_parent = None
            self._set_busy(False)  # the message that waited for the load now offers Retry

    @Slot(int, str, str)
    def _on_bridge_reply_text(self, reply_id: int, kind: str, text: str) -> None:
        msg = self.active
        if msg is None or reply_id != msg.id:
            return
        if kind == "reasoning":
            self._reasoning_t[:1] = self._reasoning_t[:1] or [time.monotonic()]
            msg.reasoning += text
        else:
            if msg.reasoning and len(self._reasoning_t) == 1:
                self._reasoning_t.append(time.monotonic())
                msg.reasoning_s = self._reasoning_t[1] - self._reasoning_t[0]
            msg.content += text
        self.store.update_message(msg.id, content=msg.content, reasoning=msg.reasoning, reasoning_s=msg.reasoning_s)
        view = self.transcript.view(msg.id)
        if view is not None:
            self.transcript.before_update()
            view.set_content(msg.content, msg.reasoning, msg.reasoning_s)
        self.reply_shown.emit(msg.id, msg.content)

    @Slot(int, object)
    def _on_bridge_reply_finished(self, reply_id: int, done) -> None:
        if self.active is None or reply_id != self.active.id:
            return
        stats = {"finish_reason": done.finish_reason, **(done.usage.to_dict() if done.usage else {})}
        state = "stopped" if done.finish_reason == "cancelled" else "complete"
        self._end_reply(state, stats)

    @Slot(int, object)
    def _on_bridge_reply_failed(self, reply_id: int, error) -> None:
        if self.active is None or reply_id != self.active.id:
            return
        self._end_reply("error", {})
        show_error(error, "the reply failed")

    def _end_reply(self, state: str, stats: dict) -> None:
        msg, self.active = self.active, None
        self.store.update_message(msg.id, content=msg.content, state=state, stats=stats)
        view = self.transcript.view(msg.id)
        if view is not None:
            view.set_stats(stats, state)
        self._set_busy(False)
        self._update_meter(stats)
        self.reply_ended.emit(msg.id, state)

    # --- helpers ---------------------------------------------------------------------------------
    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.PaletteChange:  # a theme switch: code blocks follow the new scheme
            for view in self.transcript.views.values():
                view.set_content(view.message.content, view.message.reasoning, view.message.reasoning_s)

    def _show_thread(self) -> None:
        messages = self.store.thread(self.conv_id) if self.conv_id is not None else []
        branches = {}
        for m in messages:
            siblings = self.store.siblings(m)
            branches[m.id] = (siblings.index(m.id), len(siblings))
        self.transcript.show_thread(messages, branches)
        self.transcript.set_busy(self.active is not None or self.pending_parent is not None)
        self._offer_retry()
        self.stack.setCurrentWidget(self.transcript if messages else self.empty)
        if not messages or self.active is None:
            self._update_meter()

    def _set_busy(self, busy: bool) -> None:
        self.send_button.setVisible(not busy)
        self.stop_button.setVisible(busy)
        self.transcript.set_busy(busy)
        self._offer_retry()

    def _offer_retry(self) -> None:
        """Your last message without a reply (and nothing under way) gets a Retry button."""
        views = list(self.transcript.views.values())
        idle = self.active is None and self.pending_parent is None
        last = views[-1].message if views else None
        self.transcript.offer_retry(last.id if idle and last is not None and last.role == "user" else None)

    def _update_meter(self, stats: dict | None = None) -> None:
        total = self.model_bar.context_size(self.model_bar.current())
        if stats is None:
            last = next((m.stats for m in reversed(self.store.thread(self.conv_id)) if m.stats), {}) \
                if self.conv_id is not None else {}
            stats = last
        used = int(stats.get("prompt_tokens", 0)) + int(stats.get("completion_tokens", 0))
        if not total:
            self.meter.setFormat("context: loads with the model")
            self.meter.setMaximum(1)
            self.meter.setValue(0)
            return
        self.meter.setMaximum(total)
        self.meter.setValue(min(used, total))
        warn = used >= CONTEXT_WARN * total
        self.meter.setFormat(f"context {used:,} / {total:,}" + (" · almost full" if warn else ""))
        self.meter.setProperty("warn", warn)
        self.meter.setToolTip("The next messages may not fit: start a new chat or load with a longer context"
                              if warn else "Tokens this chat uses of the model's context window")
        self.meter.style().unpolish(self.meter)
        self.meter.style().polish(self.meter)

    @Slot()
    def _on_start_clicked(self) -> None:
        self.new_chat()
        self.model_bar.set_model(STARTER_ID)
        self.model_bar.ensure_loaded(STARTER_ID)
        self.composer.setFocus()

    @Slot(str)
    def _on_model_bar_model_chosen(self, model_id: str) -> None:
        self.ctx.prefs.set("last_model", model_id)
        if self.conv_id is not None:
            self.store.update_conversation(self.conv_id, model_id=model_id)
        self._update_meter()

    @Slot()
    def _on_settings_panel_changed(self) -> None:
        if self.conv_id is not None:
            system_prompt, sampling = self.settings_panel.values()
            self.store.update_conversation(self.conv_id, system_prompt=system_prompt, sampling=sampling)
