"""The Chat page: conversations on the left, the model bar and the transcript in the middle, the chat's
system prompt, sampling and tools on the right, and the composer with its context meter at the bottom.

The page lays out small widgets and renders a ``ChatSession`` (``session.py``), which owns the
conversation flow (send, stream, stop, regenerate, retry, edit, branches) and saves every streamed batch
before it is shown. The page hands the session what the user typed and the chat's settings, and
redraws the transcript, the buttons and the meter when the session says something changed.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal, Slot
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from .. import export
from ..bridge import STARTER_ID, starter_path
from ..context import AppContext
from ..feedback import show_error
from .composer import IMAGE_SUFFIXES, ComposerBar, ContextMeter
from .conversations import ConversationList
from .picker import ModelBar
from .pictures import ImageViewer
from .session import ChatSession, ChosenModel
from .settings_panel import DEFAULT_SAMPLING, ChatSettingsPanel
from .sources import SourceDialog
from .toolcard import ToolCallView
from .transcript import Transcript


class ChatPage(QWidget):
    """Chat with a local model.

    Signals:
        reply_started(int): reply message id.
        reply_shown(int, str): reply id, all of its text shown so far (after it was saved).
        reply_ended(int, str): reply id, its final state (``complete``, ``stopped`` or ``error``).
        undo_offered(str, object): a message and a callable that undoes what it describes.
        image_attached(object): an image was checked and saved, and waits in the composer (its ``Attachment``).
        image_refused(str): an image was not attached; the sentence the user was shown.
        image_viewed(str): an image's file name, shown full size.
        document_attached(object): a document was read and saved, and waits in the composer (its
            ``DocumentAttachment``).
        document_refused(str): a document was not attached; the sentence the user was shown.
        source_shown(object): a source's dialog opened (the ``SourceDialog``: the passage in context).
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
        self._reading: dict[str, object] = {}  # a document chip's key -> the event that stops its reading
        self._read_count = 0
        self._build()
        self.session = ChatSession(ctx.store, ctx.bridge, ctx.prefs, ChosenModel(self.model_bar.current, ctx.loader),
                                   ctx.tools, self)
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
        self.empty = self._empty_state()
        self.stack = QStackedWidget()
        self.stack.addWidget(self.empty)
        self.stack.addWidget(self.transcript)
        self.bar = ComposerBar()
        self.composer, self.edit_banner = self.bar.composer, self.bar.edit_banner
        self.send_button, self.stop_button = self.bar.send_button, self.bar.stop_button
        self.meter = ContextMeter()
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

    def _empty_state(self) -> QWidget:
        box = QWidget(objectName="emptyState")
        title = QLabel("<h2>Chat with a model on your own machine</h2>", alignment=Qt.AlignCenter, wordWrap=True)
        hint = QLabel("Nothing you type leaves this computer.", alignment=Qt.AlignCenter)
        self.ready = QLabel("", alignment=Qt.AlignCenter, objectName="emptyReady", wordWrap=True)
        self.start_button = QPushButton("Start chatting with SmolLM2 (built in)", objectName="primary")
        self.start_button.setVisible(starter_path() is not None)
        self.start_button.clicked.connect(self._on_start_clicked)
        lay = QVBoxLayout(box)
        lay.addStretch(1)
        for w in (title, hint, self.ready):
            lay.addWidget(w)
        lay.addWidget(self.start_button, 0, Qt.AlignCenter)
        lay.addStretch(2)
        return box

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
        self.settings_panel.changed.connect(self._on_settings_panel_changed)
        t.edit_requested.connect(self.edit_message)
        t.regenerate_requested.connect(self.regenerate)
        t.branch_requested.connect(self.flip_branch)
        t.retry_requested.connect(self.retry)
        t.tool_decided.connect(self._on_transcript_tool_decided)
        t.thumbnails_wanted.connect(self._on_transcript_thumbnails_wanted)
        t.image_opened.connect(self._on_transcript_image_opened)
        t.source_opened.connect(self._on_transcript_source_opened)
        self.bar.attach_requested.connect(self.attach)
        self.bar.document_removed.connect(self._on_bar_document_removed)
        self.bar.send_requested.connect(self.send)
        self.bar.cancel_requested.connect(self._cancel_edit)
        self.bar.stop_requested.connect(self.stop)

    # --- conversations ---------------------------------------------------------------------------
    @Slot()
    def new_chat(self) -> None:
        self.settings_panel.set_values("", DEFAULT_SAMPLING)
        self.settings_panel.set_tools({})
        self._list_servers()
        self.list_collections()
        self.model_bar.set_model(self.ctx.prefs.get("last_model") or (STARTER_ID if starter_path() else None))
        self.conversations.view.clearSelection()
        self.session.new_chat()
        self.composer.setFocus()

    @Slot(int)
    def open_conversation(self, conv_id: int) -> None:
        conv = self.session.open(conv_id)
        if conv is None:
            return self.new_chat()
        self.settings_panel.set_values(conv.system_prompt, conv.sampling)
        self.settings_panel.set_tools(conv.tools)
        self._list_servers()
        self.list_collections()
        self.model_bar.set_model(conv.model_id or self.ctx.prefs.get("last_model"))
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
        """Markdown links the chat's images in a folder beside the file (``NAME-images/``), copied there."""
        if kind == "markdown":
            folder = export.images_folder(path)
            text = export.to_markdown(self.store, conv_id, folder)
            images = [self.ctx.bridge.images.path(n) for n in export.image_names(self.store, conv_id)]
        else:
            text, images = export.to_json(self.store, conv_id), []
        self.ctx.tasks.run_in_background(lambda: export.save(path, text, images),  # atomic: a crash keeps the old file
                                         lambda _r, e: e and show_error(e, f"exporting to {path}"))

    @Slot(int, str)
    def _on_conversations_export_requested(self, conv_id: int, kind: str) -> None:
        suffix = ".md" if kind == "markdown" else ".json"
        name = self.store.conversation(conv_id).title.replace("/", "-")[:60] + suffix
        path, _ = QFileDialog.getSaveFileName(self, "Export chat", str(Path.home() / name))
        if path:
            self.export(conv_id, kind, Path(path))

    # --- what the user does (the session decides) ------------------------------------------------
    @Slot()
    def send(self) -> None:
        system_prompt, sampling = self.settings_panel.values()
        images = [a.name for a in self.bar.attachments()]
        reading = self.bar.documents_reading()
        if reading:
            show_error(f"{', '.join(reading)} is still being read: send once its chip shows its pages, or take it off")
            return
        documents = [d.as_dict() for d in self.bar.documents()]
        if self.session.send(self.bar.text(), system_prompt, sampling, self.settings_panel.tools(), images,
                             documents):
            self.composer.clear()
            self.bar.clear_attachments()
            self.conversations.refresh(select=self.conv_id)

    @Slot(list)
    def attach(self, sources: list) -> None:
        """Check and save images (file paths, a pasted file's ``(bytes, media type)``, a pasted ``QImage``)
        and read documents (file paths that are not images) on the task pool; each lands in the composer,
        or is refused in words (the typed text stays)."""
        model_id = self.model_bar.current()
        for source in sources:
            if isinstance(source, Path) and self._is_document(source):
                self.attach_document(source)
                continue
            source, media_type = source if isinstance(source, tuple) else (source, None)
            self.ctx.bridge.images.attach(source, model_id, self._on_image_checked, media_type)

    def _is_document(self, path: Path) -> bool:
        """A file that is not an image by its name goes to the documents' reader: it reads it, or says
        which kinds it reads."""
        return path.suffix.lower() not in IMAGE_SUFFIXES and (self.ctx.bridge.documents.accepts(path)
                                                              or path.suffix.lower() not in ("", ".svg"))

    def attach_document(self, path: Path, label: str | None = None) -> None:
        """Read and save the document at ``path`` on the task pool; its chip shows it being read (its ✕
        stops that), then its pages. ``label``: the name to show (a saved copy's original name)."""
        self._read_count += 1
        key = f"document-{self._read_count}"
        self.bar.add_document(key, label or path.name)
        self._reading[key] = self.ctx.bridge.documents.attach(
            path, lambda attachment, error: self._on_document_read(key, attachment, error), label,
            lambda page, pages: self.bar.document_progress(key, page, pages))

    def _on_document_read(self, key: str, attachment, error) -> None:
        self._reading.pop(key, None)
        if error is not None:
            self.bar.remove_document(key)
            if type(error).__name__ != "AttachCancelled":  # taken off by the user: nothing to say
                self.document_refused.emit(show_error(error))
            return
        if self.bar.document_ready(key, attachment):
            self.document_attached.emit(attachment)

    @Slot(str)
    def _on_bar_document_removed(self, key: str) -> None:
        cancel = self._reading.pop(key, None)
        if cancel is not None:
            cancel.set()

    def _on_image_checked(self, attachment, error) -> None:
        if error is not None:
            self.image_refused.emit(show_error(error))
            return
        self.transcript.add_thumbnails({attachment.name: attachment.thumbnail})
        self.bar.add_attachment(attachment)
        self.image_attached.emit(attachment)

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
        view = self.transcript.view(msg.id)
        if view is not None:
            self.transcript.before_update()
            if msg.sources and getattr(view.message, "sources", None) != msg.sources:
                view.message.sources = msg.sources
            view.set_content(msg.content, msg.reasoning, msg.reasoning_s)
        self.reply_shown.emit(msg.id, msg.content)

    @Slot(object)
    def _on_session_message_ended(self, msg) -> None:
        view = self.transcript.view(msg.id)
        if view is not None:
            view.set_stats(msg.stats, msg.state)
        self._update_meter(msg.stats)

    @Slot(int)
    def _on_session_prompt_counted(self, tokens: int) -> None:
        self._update_meter({"prompt_tokens": tokens})  # the reply's own tokens join it when it ends

    @Slot(object)
    def _on_session_editing_changed(self, msg) -> None:
        self.bar.show_edit(msg.content if msg is not None else None)
        self.bar.clear_attachments()
        if msg is not None and msg.images:  # the edited message's images come back, to keep or remove
            self.attach([self.ctx.bridge.images.path(name) for name in msg.images])
        for doc in msg.documents if msg is not None else []:  # ... and its documents, from their saved copies
            self.attach_document(self.ctx.bridge.documents.path(doc["name"]), doc["file"])

    @Slot(object)
    def _on_session_tool_changed(self, msg) -> None:
        view = self.transcript.view(msg.id)
        if isinstance(view, ToolCallView):
            self.transcript.before_update()
            view.set_message(msg)
        else:
            self._show_thread()

    @Slot(int, str)
    def _on_transcript_tool_decided(self, message_id: int, decision: str) -> None:
        self.session.decide(message_id, decision)

    @Slot(list)
    def _on_transcript_thumbnails_wanted(self, names: list) -> None:
        self.ctx.bridge.images.thumbnails(names, self._on_thumbnails_read)

    def _on_thumbnails_read(self, found, error) -> None:
        if error is not None:
            show_error(error, "reading a chat's images")
        else:
            self.transcript.add_thumbnails(found)

    @Slot(str)
    def _on_transcript_image_opened(self, name: str) -> None:
        self.ctx.bridge.images.full(name, lambda image, error: self._on_full_image_read(name, image, error))

    def _on_full_image_read(self, name: str, image, error) -> None:
        if error is not None:
            show_error(error)
            return
        self.viewer = ImageViewer(image, f"Image · {image.width()}x{image.height()}", self)
        self.viewer.setAttribute(Qt.WA_DeleteOnClose)
        self.viewer.open()
        self.image_viewed.emit(name)

    @Slot(int, int)
    def _on_transcript_source_opened(self, message_id: int, n: int) -> None:
        view = self.transcript.view(message_id)
        source = view.sources.source(n) if view is not None and hasattr(view, "sources") else None
        if source is not None:
            self.ctx.bridge.documents.context(source, lambda found, error: self._on_source_read(source, found, error))

    def _on_source_read(self, source: dict, found, error) -> None:
        """Show the passage in its context; when its document cannot be read any more, the passage alone
        (it was saved with the reply), saying why."""
        if error is not None:
            before, passage, after, problem = "", source["text"], "", f"The passage as it was given: {error}"
        else:
            (before, passage, after), problem = found, ""
        self.source_dialog = SourceDialog(source, before, passage, after, problem, self)
        self.source_dialog.setAttribute(Qt.WA_DeleteOnClose)
        self.source_dialog.open()
        self.source_shown.emit(self.source_dialog)

    def _list_servers(self) -> None:
        """Which MCP servers a chat can turn on: ``mcp.json`` is read on a worker, never here."""
        if self.ctx.tools is not None:
            self.ctx.tasks.run_in_background(self.ctx.tools.server_names, self._on_servers_listed)

    @Slot()
    def list_collections(self) -> None:
        """Which knowledge collections a chat can tick, read on a worker (the Knowledge page calls this
        when it makes or deletes one)."""
        self.ctx.bridge.knowledge.list(self._on_collections_listed)

    def _on_collections_listed(self, rows, error) -> None:
        if error is not None:
            show_error(error, "listing the knowledge collections")
        else:
            self.settings_panel.set_collections([(r.collection.id, r.collection.name) for r in rows])

    def _on_servers_listed(self, names, error) -> None:
        if error is not None:
            show_error(error, "reading the MCP servers")
        else:
            self.settings_panel.set_servers(names)

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
        current = self.model_bar.current()
        self.start_button.setVisible(not loaded and starter_path() is not None)
        if loaded:
            model = current if current in loaded else loaded[0]
            self.ready.setText(f"{model} is loaded: type below to start a chat.")
        else:
            self.ready.setText("")

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
    def _on_start_clicked(self) -> None:
        self.new_chat()
        self.model_bar.set_model(STARTER_ID)
        self.ctx.loader.ensure_loaded(STARTER_ID)
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
            self.store.update_conversation(self.conv_id, system_prompt=system_prompt, sampling=sampling,
                                           tools=self.settings_panel.tools())
