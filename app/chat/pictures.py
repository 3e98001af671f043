"""Images in a sent message: the row of thumbnails in its card, and the dialog that shows one full size.

The thumbnails and the full image are read from disk by the bridge (``bridge/attachments.py``) on the
task pool; these widgets only show the ``QImage`` they are handed.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication, QIcon, QImage, QPixmap
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

THUMB = QSize(96, 96)


class Thumbnails(QWidget):
    """A message's images as buttons; a click asks for the image full size.

    Signals:
        opened(str): an image's file name (its thumbnail was clicked).
    """

    opened = Signal(str)

    def __init__(self, names: list[str], parent: QWidget | None = None):
        super().__init__(parent, objectName="messageImages")
        self.buttons: dict[str, QToolButton] = {}
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        for i, name in enumerate(names):
            button = QToolButton(text=f"Image {i + 1}", toolTip="Click to view full size", autoRaise=True)
            button.setIconSize(THUMB)
            button.setToolButtonStyle(Qt.ToolButtonTextOnly)  # until its thumbnail arrives
            button.setProperty("image_name", name)
            button.clicked.connect(self._on_button_clicked)
            self.buttons[name] = button
            lay.addWidget(button)
        lay.addStretch(1)

    def show_thumbnails(self, found: dict[str, QImage]) -> None:
        for name, button in self.buttons.items():
            if name in found and button.toolButtonStyle() == Qt.ToolButtonTextOnly:
                button.setIcon(QIcon(QPixmap.fromImage(found[name])))
                button.setToolButtonStyle(Qt.ToolButtonIconOnly)

    @Slot()
    def _on_button_clicked(self) -> None:
        self.opened.emit(self.sender().property("image_name"))


class ImageViewer(QDialog):
    """One image, as large as the screen allows (scrolling past that), with Close."""

    def __init__(self, image: QImage, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.picture = QLabel(alignment=Qt.AlignCenter)
        self.picture.setPixmap(QPixmap.fromImage(image))
        scroll = QScrollArea(widgetResizable=True)
        scroll.setWidget(self.picture)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(scroll, 1)
        lay.addWidget(buttons)
        screen = QGuiApplication.primaryScreen()
        room = screen.availableGeometry().size() * 0.9 if screen else QSize(1000, 700)
        self.resize(min(image.width() + 40, room.width()), min(image.height() + 80, room.height()))
