"""What waits in the composer to be sent, one chip each: an image (its thumbnail) and a document (its
name, a busy bar while it is read, then its page count). A chip's ✕ takes it off; ``ComposerBar``
(``composer.py``) lays the chips out and says which are waiting.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QStyle, QToolButton, QWidget


class AttachmentChip(QWidget):
    """One image waiting in the composer: its thumbnail, and a button that takes it off.

    Signals:
        removed(str): the image's file name (Remove was clicked).
    """

    removed = Signal(str)

    def __init__(self, name: str, label: str, thumb: QImage, parent: QWidget | None = None):
        super().__init__(parent, objectName="attachment")
        self.name = name
        self.picture = QLabel(toolTip=label)
        self.picture.setPixmap(QPixmap.fromImage(thumb))  # a small thumbnail: cheap here
        self.remove_button = QToolButton(text="✕", toolTip=f"Remove {label}", autoRaise=True)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.picture)
        lay.addWidget(self.remove_button, 0, Qt.AlignTop)

    @Slot()
    def _on_remove_clicked(self) -> None:
        self.removed.emit(self.name)


class DocumentChip(QWidget):
    """One document waiting in the composer: its name, then its page count once read (a busy bar
    until then), and a button that takes it off (which stops the reading).

    Signals:
        removed(str): the chip's key (Remove was clicked).
    """

    removed = Signal(str)

    def __init__(self, key: str, label: str, parent: QWidget | None = None):
        super().__init__(parent, objectName="documentChip")
        self.key, self.attachment, self.name = key, None, label
        self.icon = QLabel()
        self.icon.setPixmap(self.style().standardIcon(QStyle.SP_FileIcon).pixmap(16, 16))
        self.label = QLabel(label, toolTip=f"Reading {label}…")
        self.label.setTextFormat(Qt.PlainText)
        self.progress = QProgressBar(maximumWidth=60, maximumHeight=8, textVisible=False)
        self.progress.setRange(0, 0)  # busy until a PDF says how many pages it has (the other kinds: until read)
        self.remove_button = QToolButton(text="✕", toolTip=f"Remove {label}", autoRaise=True)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 2, 0, 2)
        lay.setSpacing(4)
        lay.addWidget(self.icon)
        lay.addWidget(self.label)
        lay.addWidget(self.progress)
        lay.addWidget(self.remove_button)

    def set_progress(self, page: int, pages: int) -> None:
        """How far the reading is: page ``page`` of ``pages``."""
        self.progress.setRange(0, pages)
        self.progress.setValue(page)
        self.label.setToolTip(f"Reading {self.name}: page {page} of {pages}")

    def set_ready(self, attachment) -> None:
        """The document was read and saved (a ``bridge.chatdocs.DocumentAttachment``)."""
        self.attachment = attachment
        self.progress.hide()
        size = f"{attachment.pages} page{'s' if attachment.pages != 1 else ''}" if attachment.pages \
            else f"{attachment.chars:,} characters"
        self.label.setText(f"{attachment.label} · {size}")
        self.label.setToolTip(f"{attachment.label} ({attachment.kind}, {size}): sent whole when it fits the "
                              "model's context, else the passages that match each question, as numbered sources")

    @Slot()
    def _on_remove_clicked(self) -> None:
        self.removed.emit(self.key)
