"""What the Chat page shows while a chat has no messages: a greeting, and how to begin.

While no chat model is loaded it offers the built-in model (when the app carries it); once one is loaded
it says which model the first message goes to. The page says what is loaded (``show_loaded``) and starts
the built-in model when asked (``start_requested``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from ..bridge import starter_path


class Welcome(QWidget):
    """The empty chat.

    Signals:
        start_requested(): "Start chatting with SmolLM2" was clicked.
    """

    start_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent, objectName="emptyState")
        title = QLabel("<h2>Chat with a model on your own machine</h2>", alignment=Qt.AlignCenter, wordWrap=True)
        hint = QLabel("Nothing you type leaves this computer.", alignment=Qt.AlignCenter)
        self.ready = QLabel("", alignment=Qt.AlignCenter, objectName="emptyReady", wordWrap=True)
        self.start_button = QPushButton("Start chatting with SmolLM2 (built in)", objectName="primary")
        self.start_button.setVisible(starter_path() is not None)
        self.start_button.clicked.connect(self.start_requested)
        lay = QVBoxLayout(self)
        lay.addStretch(1)
        for w in (title, hint, self.ready):
            lay.addWidget(w)
        lay.addWidget(self.start_button, 0, Qt.AlignCenter)
        lay.addStretch(2)

    def show_loaded(self, loaded: list[str], current: str | None) -> None:
        """``loaded``: the chat models loaded now; ``current``: the model on show in the model bar."""
        self.start_button.setVisible(not loaded and starter_path() is not None)
        if loaded:
            model = current if current in loaded else loaded[0]
            self.ready.setText(f"{model} is loaded: type below to start a chat.")
        else:
            self.ready.setText("")
