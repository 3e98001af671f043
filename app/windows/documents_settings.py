"""The Settings page's Documents group: which model embeds documents, so passages are found by meaning
as well as by keywords.

The choice is the engine's (``documents.json`` in the config folder, read and written through
``bridge.embedder``), so the app's chats, its API server's vector stores and ``fireside serve`` all use
it. Dedicated embedders (all-MiniLM, bge, nomic-embed: encoders whose GGUF says so) are listed first;
chat models can embed too, worse, and are listed after them. With none chosen, passages are found by
keywords alone (BM25), and this group says so.
"""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel

from ..context import AppContext
from ..feedback import show_error

NONE_LABEL = "None: find passages by keywords alone (BM25)"


class DocumentsBox(QGroupBox):
    """Settings: the documents' embedder. Signals: none (a choice is saved and applied at once)."""

    def __init__(self, ctx: AppContext):
        super().__init__("Documents")
        self.ctx = ctx
        self.embedder = QComboBox(objectName="documentsEmbedder")
        self.embedder.setMinimumContentsLength(28)
        self.embedder.activated.connect(self._on_embedder_activated)
        self.state = QLabel("…", objectName="embedderState", wordWrap=True)
        form = QFormLayout(self)
        form.addRow("Embedder", self.embedder)
        form.addRow(self.state)
        form.addRow(QLabel("<small>Used for documents attached to chats and for the API's vector stores. A "
                           "dedicated embedder finds passages by meaning as well as by words: get one in "
                           "Discover (its Embedders button: nomic-embed-text, bge-small, all-MiniLM). "
                           "Changing it re-embeds your documents in the background.</small>", wordWrap=True))
        self.refresh()

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
        self.embedder.setCurrentIndex(max(0, self.embedder.findData(chosen)))
        self.embedder.blockSignals(False)
        self._show_state(chosen, chosen is None or chosen in embedders or chosen in others,
                         bool(embedders))

    def _show_state(self, chosen: str | None, present: bool, have_embedder: bool) -> None:
        if chosen is None:
            tip = "" if have_embedder else " No embedder is in your library yet."
            self.state.setText(f"Passages are found by keywords alone.{tip}")
        elif not present:
            self.state.setText(f"{chosen} is no longer in your library: passages are found by keywords alone "
                               "until you choose another.")
        else:
            self.state.setText(f"Passages are found by keywords and by meaning, embedded by {chosen}.")

    @Slot(int)
    def _on_embedder_activated(self, index: int) -> None:
        model_id = self.embedder.itemData(index)
        self.state.setText("Saving…")
        self.ctx.bridge.embedder.choose(model_id, self._on_chosen)

    def _on_chosen(self, model_id, error) -> None:
        if error:
            show_error(error, "choosing the documents' embedder")
        self.refresh()
