"""The bottom of the Chat page: the message box with Attach, Send and Stop, the images and documents
waiting to be sent, the edit banner, and the context meter.

Small widgets that render what the chat session says (busy or not, editing or not, tokens used) and
report what the user does; none of them knows about the store or the engine. An image or a document
comes in three ways, one road: the Attach button's file dialog, a drop and a paste (both reach
``Composer.insertFromMimeData``) all end in ``attach_requested`` with what to read (file paths, a
pasted file's bytes or a pasted picture); the page's ``Attacher`` (``attacher.py``) has the bridge check
and save it, off the GUI thread, and hands the result back to ``add_attachment`` (an image) or
``document_ready`` (a document, shown as a chip, ``chips.py``, that says it is being read from
``add_document`` on, and cancels the reading when taken off).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal, Slot
from PySide6.QtGui import QImage
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from .chips import AttachmentChip, DocumentChip

CONTEXT_WARN = 0.85
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp")
DOCUMENT_PATTERNS = "*.pdf *.docx *.html *.htm *.md *.markdown *.txt *.rst *.csv *.py *.js *.ts *.rs *.go *.c *.cpp *.java"
IMAGE_PATTERNS = "*.png *.jpg *.jpeg *.webp *.gif *.bmp"
ATTACH_FILTER = (f"Images and documents ({IMAGE_PATTERNS} {DOCUMENT_PATTERNS});;Images ({IMAGE_PATTERNS});;"
                 f"Documents ({DOCUMENT_PATTERNS});;All files (*)")
PASTED_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/bmp")


def images_in_mime(mime: QMimeData) -> list:
    """What a drop or a paste holds that should be attached: local files (any file dropped is tried, so
    a bad one is refused in words rather than pasted as its path), else an image file's bytes as
    ``(bytes, media type)``, else a picture (``QImage``); [] for text."""
    files = [Path(u.toLocalFile()) for u in mime.urls() if u.isLocalFile()] if mime.hasUrls() else []
    if files:
        return files
    for kind in PASTED_TYPES:
        if mime.hasFormat(kind):
            return [(bytes(mime.data(kind).data()), kind)]
    if mime.hasImage():
        image = mime.imageData()
        return [image] if isinstance(image, QImage) and not image.isNull() else []
    return []


class Composer(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter starts a new line, Escape cancels an edit.

    Signals:
        submitted(): Enter was pressed.
        cancelled(): Escape was pressed.
        images_offered(list): images were dropped or pasted (see ``images_in_mime``).
    """

    submitted = Signal()
    cancelled = Signal()
    images_offered = Signal(list)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return bool(images_in_mime(source)) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        """A drop or a paste: images go to ``images_offered``; text goes in the box as usual."""
        found = images_in_mime(source)
        if found:
            self.images_offered.emit(found)
        else:
            super().insertFromMimeData(source)

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key_Return, Qt.Key_Enter) and not event.modifiers() & Qt.ShiftModifier:
            self.submitted.emit()
        elif event.key() == Qt.Key_Escape:
            self.cancelled.emit()
        else:
            super().keyPressEvent(event)


class ComposerBar(QWidget):
    """The edit banner and the images waiting to be sent above the message box; Attach, Send and Stop
    beside it.

    Signals:
        send_requested(): Send was clicked or Enter pressed.
        stop_requested(): Stop was clicked.
        cancel_requested(): Escape was pressed (ends an edit).
        attach_requested(list): images or documents to check and attach: file paths (Attach, a drop), a
            pasted file's ``(bytes, media type)`` or a pasted ``QImage``.
        document_removed(str): a document chip's key (taken off: a reading under way should stop).
    """

    send_requested = Signal()
    stop_requested = Signal()
    cancel_requested = Signal()
    attach_requested = Signal(list)
    document_removed = Signal(str)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.edit_banner = QLabel(visible=False, objectName="editBanner")
        self.composer = Composer(placeholderText="Message the model (Enter sends, Shift+Enter for a new line; "
                                                 "drop or paste an image or a document to attach it)")
        self.composer.setMaximumHeight(110)
        self.attach_button = QPushButton("Attach…", toolTip="Attach a document (PDF, Word, HTML, Markdown, text, "
                                                            "source code) or an image (for a model that can see)")
        self.send_button = QPushButton("Send", objectName="primary")
        self.stop_button = QPushButton("Stop", visible=False, objectName="danger")
        self.strip = QHBoxLayout()
        self.strip.setContentsMargins(0, 0, 0, 0)
        self.strip.addStretch(1)
        self.strip_box = QWidget(visible=False, objectName="attachments")
        self.strip_box.setLayout(self.strip)
        self.chips: dict[str, tuple[AttachmentChip, object]] = {}
        self.doc_chips: dict[str, DocumentChip] = {}
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.attach_button)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.edit_banner)
        lay.addWidget(self.strip_box)
        lay.addLayout(row)
        self.composer.submitted.connect(self.send_requested)
        self.composer.cancelled.connect(self.cancel_requested)
        self.composer.images_offered.connect(self.attach_requested)
        self.send_button.clicked.connect(self.send_requested)
        self.stop_button.clicked.connect(self.stop_requested)
        self.attach_button.clicked.connect(self._on_attach_clicked)

    def text(self) -> str:
        return self.composer.toPlainText()

    # --- images waiting to be sent ---------------------------------------------------------------
    @Slot()
    def _on_attach_clicked(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach images or documents", str(Path.home()), ATTACH_FILTER)
        if paths:
            self.attach_requested.emit([Path(p) for p in paths])

    def add_attachment(self, attachment) -> None:
        """Show ``attachment`` (a ``bridge.attachments.Attachment``, checked and saved) until it is sent
        or removed; the same image twice is shown once."""
        if attachment.name in self.chips:
            return
        chip = AttachmentChip(attachment.name, attachment.label, attachment.thumbnail)
        chip.removed.connect(self.remove_attachment)
        self.strip.insertWidget(self.strip.count() - 1, chip)
        self.chips[attachment.name] = (chip, attachment)
        self.strip_box.show()

    @Slot(str)
    def remove_attachment(self, name: str) -> None:
        chip, _ = self.chips.pop(name, (None, None))
        if chip is not None:
            self.strip.removeWidget(chip)
            chip.deleteLater()
        self._show_strip()

    def _show_strip(self) -> None:
        self.strip_box.setVisible(bool(self.chips or self.doc_chips))

    # --- documents waiting to be sent ------------------------------------------------------------
    def add_document(self, key: str, label: str) -> DocumentChip:
        """Show a chip for a document being read (``key`` names it until ``document_ready``)."""
        chip = DocumentChip(key, label)
        chip.removed.connect(self._on_document_chip_removed)
        self.strip.insertWidget(self.strip.count() - 1, chip)
        self.doc_chips[key] = chip
        self.strip_box.show()
        return chip

    def document_progress(self, key: str, page: int, pages: int) -> None:
        chip = self.doc_chips.get(key)
        if chip is not None and chip.attachment is None:
            chip.set_progress(page, pages)

    def document_ready(self, key: str, attachment) -> bool:
        """The document of chip ``key`` was read and saved; False when its chip was taken off meanwhile
        (or the same document already waits: its second chip goes)."""
        chip = self.doc_chips.get(key)
        if chip is None:
            return False
        if any(c.attachment is not None and c.attachment.name == attachment.name for c in self.doc_chips.values()):
            self.remove_document(key)
            return False
        chip.set_ready(attachment)
        return True

    @Slot(str)
    def _on_document_chip_removed(self, key: str) -> None:
        self.remove_document(key)
        self.document_removed.emit(key)

    def remove_document(self, key: str) -> None:
        chip = self.doc_chips.pop(key, None)
        if chip is not None:
            self.strip.removeWidget(chip)
            chip.deleteLater()
        self._show_strip()

    def documents(self) -> list:
        """The documents read and waiting, in the order they were attached."""
        return [c.attachment for c in self.doc_chips.values() if c.attachment is not None]

    def documents_reading(self) -> list[str]:
        """The names of the documents still being read."""
        return [c.name for c in self.doc_chips.values() if c.attachment is None]

    def attachments(self) -> list:
        """The images waiting, in the order they were attached."""
        return [attachment for _chip, attachment in self.chips.values()]

    def clear_attachments(self) -> None:
        for name in list(self.chips):
            self.remove_attachment(name)
        for key in list(self.doc_chips):
            self.remove_document(key)

    def set_busy(self, busy: bool) -> None:
        self.send_button.setVisible(not busy)
        self.stop_button.setVisible(busy)

    def show_edit(self, text: str | None) -> None:
        """Start editing ``text`` (it fills the box), or with None end an edit (the box is cleared)."""
        if text is None:
            if self.edit_banner.isVisibleTo(self):
                self.composer.clear()
            self.edit_banner.hide()
            return
        self.composer.setPlainText(text)
        self.edit_banner.setText("Editing a message: Send keeps the earlier version as a branch (Esc cancels)")
        self.edit_banner.show()
        self.composer.setFocus()


class ContextMeter(QProgressBar):
    """How much of the model's context window the chat uses, with a warning before it overflows."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent, objectName="contextMeter", minimumWidth=240, maximumWidth=320, textVisible=True)
        self.setFormat("context: not loaded")
        self.setValue(0)

    def show_usage(self, used: int, total: int) -> None:
        if not total:
            self.setFormat("context: loads with the model")
            self.setMaximum(1)
            self.setValue(0)
            return
        self.setMaximum(total)
        self.setValue(min(used, total))
        warn = used >= CONTEXT_WARN * total
        self.setFormat(f"context {used:,} / {total:,}" + (" · almost full" if warn else ""))
        self.setProperty("warn", warn)
        self.setToolTip("The next messages may not fit: start a new chat or load with a longer context"
                        if warn else "Tokens this chat uses of the model's context window")
        self.style().unpolish(self)
        self.style().polish(self)
