"""The Settings page's Documents group: which model embeds documents, so passages are found by meaning
as well as by keywords.

The choice is the engine's (``documents.json`` in the config folder, read and written through
``bridge.embedder``), so the app's chats, its API server's vector stores and ``fireside serve`` all use
it. Dedicated embedders (all-MiniLM, bge, nomic-embed: encoders whose GGUF says so) are listed first;
chat models can embed too, worse, and are listed after them. With none chosen, passages are found by
keywords alone (BM25), and this group says so.

A change is asked first (it loads a model, a second copy of a chat model, and re-embeds every collection),
its progress shows here (and on the Knowledge page) until every passage has its vector, and Undo goes back
to the previous choice; leaving a model unloads the copy it had loaded to embed.
"""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
)

from ..context import AppContext
from ..feedback import show_error

NONE_LABEL = "None: find passages by keywords alone (BM25)"


POLL_MS = 500


class DocumentsBox(QGroupBox):
    """Settings: the documents' embedder.

    Signals:
        chosen(object): a new embedder (its model id, or None) was saved and applied.
        progressed(object): the background embedding was read (an ``Embedding``, or None once done).
    """

    chosen = Signal(object)
    progressed = Signal(object)

    def __init__(self, ctx: AppContext):
        super().__init__("Documents")
        self.ctx = ctx
        self.current: str | None = None  # the choice as last read
        self.previous: str | None = None  # what Undo goes back to
        self.pending: str | None = None  # asked about, not yet confirmed
        self.embedder = QComboBox(objectName="documentsEmbedder")
        self.embedder.setMinimumContentsLength(28)
        self.embedder.activated.connect(self._on_embedder_activated)
        self.state = QLabel("…", objectName="embedderState", wordWrap=True)
        self.confirm = self._confirm_row()
        self.progress = QProgressBar(visible=False, textVisible=True, objectName="embeddingProgress")
        self.undo = QPushButton("Undo", visible=False, toolTip="Go back to the embedder chosen before")
        self.undo.clicked.connect(self._on_undo_clicked)
        self.poll = QTimer(self, interval=POLL_MS)
        self.poll.timeout.connect(self._on_poll_timeout)
        progress = QHBoxLayout()
        progress.addWidget(self.progress, 1)
        progress.addWidget(self.undo)
        form = QFormLayout(self)
        form.addRow("Embedder", self.embedder)
        form.addRow(self.confirm)
        form.addRow(self.state)
        form.addRow(progress)
        form.addRow(QLabel("<small>Used for documents attached to chats and for the API's vector stores. A "
                           "dedicated embedder finds passages by meaning as well as by words: get one in "
                           "Discover (its Embedders button: nomic-embed-text, bge-small, all-MiniLM). "
                           "Changing it re-embeds your documents in the background.</small>", wordWrap=True))
        self.refresh()

    def _confirm_row(self) -> QFrame:
        row = QFrame(objectName="embedderConfirm", visible=False)
        self.question = QLabel(wordWrap=True)
        self.apply_button = QPushButton("Change", objectName="primary")
        self.apply_button.clicked.connect(self._on_apply_clicked)
        self.keep_button = QPushButton("Keep the current one")
        self.keep_button.clicked.connect(self._on_keep_clicked)
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.question, 1)
        lay.addWidget(self.apply_button)
        lay.addWidget(self.keep_button)
        return row

    @Slot()
    def refresh(self) -> None:
        self.ctx.bridge.embedder.read(self._on_read)

    def _on_read(self, result, error) -> None:
        if error:
            show_error(error, "reading the documents' embedder")
            return
        chosen, models = result
        embedders = [m for m, only in models if only]
        others = [m for m, only in models if not only]
        self.embedder.blockSignals(True)
        self.embedder.clear()
        self.embedder.addItem(NONE_LABEL, None)
        for model_id in embedders:
            self.embedder.addItem(f"{model_id}  · embedder", model_id)
        if others:
            self.embedder.insertSeparator(self.embedder.count())
            for model_id in others:
                self.embedder.addItem(f"{model_id}  · chat model (weaker at this)", model_id)
        if chosen and self.embedder.findData(chosen) < 0:  # chosen, then deleted or renamed
            self.embedder.addItem(f"{chosen}  · not in the library", chosen)
        self.current = chosen
        self.embedder.setCurrentIndex(max(0, self.embedder.findData(self.pending if self.confirm.isVisible()
                                                                     else chosen)))
        self.embedder.blockSignals(False)
        self._show_state(chosen, chosen is None or chosen in embedders or chosen in others,
                         bool(embedders))
        self._on_poll_timeout()  # an embedding under way (the app started mid-way, or a choice just made)

    def _show_state(self, chosen: str | None, present: bool, have_embedder: bool) -> None:
        if chosen is None:
            tip = "" if have_embedder else " No embedder is in your library yet."
            self.state.setText(f"Passages are found by keywords alone.{tip}")
        elif not present:
            self.state.setText(f"{chosen} is no longer in your library: passages are found by keywords alone "
                               "until you choose another.")
        else:
            self.state.setText(f"Passages are found by keywords and by meaning, embedded by {chosen}.")

    # --- changing: asked first, then applied, with its progress and an undo ---------------------------
    @Slot(int)
    def _on_embedder_activated(self, index: int) -> None:
        model_id = self.embedder.itemData(index)
        if model_id == self.current:
            self.confirm.hide()
            return
        self.pending = model_id
        self.question.setText(self._question(model_id, "chat model" in self.embedder.itemText(index)))
        self.confirm.show()

    def _question(self, model_id: str | None, chat_model: bool) -> str:
        if model_id is None:
            return ("Stop embedding documents? Passages will be found by keywords alone, and the model loaded "
                    f"to embed ({self.current}) is unloaded.")
        copy = (" A chat model loads a second copy of itself to embed, and is weaker at it than a dedicated "
                "embedder." if chat_model else "")
        return (f"Embed documents with {model_id}? It loads {model_id} and re-embeds every collection in the "
                f"background (progress shows below); searches use keywords until it is done.{copy}")

    @Slot()
    def _on_apply_clicked(self) -> None:
        self.choose(self.pending)

    @Slot()
    def _on_keep_clicked(self) -> None:
        self.confirm.hide()
        self.embedder.setCurrentIndex(max(0, self.embedder.findData(self.current)))

    @Slot()
    def _on_undo_clicked(self) -> None:
        self.undo.hide()
        self.choose(self.previous, undoing=True)

    def choose(self, model_id: str | None, undoing: bool = False) -> None:
        """Save and apply ``model_id`` (None: keywords alone) on the task pool; Undo offers the one before."""
        self.confirm.hide()
        self.embedder.setEnabled(False)  # one change at a time
        self.state.setText("Saving…")
        before = self.current
        self.ctx.bridge.embedder.choose(model_id, lambda chosen, error: self._on_chosen(before, undoing, chosen, error))

    def _on_chosen(self, before, undoing: bool, model_id, error) -> None:
        self.embedder.setEnabled(True)
        if error:
            show_error(error, "choosing the documents' embedder")
        else:
            self.previous = before
            self.undo.setVisible(not undoing)
            self.undo.setToolTip(f"Go back to {before or 'keywords alone'}")
            self.chosen.emit(model_id)
        self.refresh()

    @Slot()
    def _on_poll_timeout(self) -> None:
        self.ctx.bridge.embedder.progress(self._on_progress_read)

    def _on_progress_read(self, embedding, error) -> None:
        if error:
            self.poll.stop()
            show_error(error, "reading the documents' embedding")
            return
        running = embedding is not None and not embedding.error and embedding.done < embedding.total
        self.progress.setVisible(running)
        if embedding is not None and embedding.error:
            self.state.setText(f"Embedding stopped: {embedding.error}. Passages are found by keywords until "
                               "it works again.")
        elif running:
            self.progress.setRange(0, max(embedding.total, 1))
            self.progress.setValue(embedding.done)
            self.progress.setFormat(f"Embedding with {embedding.embedder}: %v of %m passages")
        if running:
            self.poll.start()
        else:
            self.poll.stop()
        self.progressed.emit(embedding)
