"""The bottom of the Chat page: the message box with Send and Stop, the edit banner, and the context meter.

Small widgets that render what the chat session says (busy or not, editing or not, tokens used) and
report what the user does; none of them knows about the store or the engine.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

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


class ComposerBar(QWidget):
    """The edit banner above the message box, and Send / Stop beside it.

    Signals:
        send_requested(): Send was clicked or Enter pressed.
        stop_requested(): Stop was clicked.
        cancel_requested(): Escape was pressed (ends an edit).
    """

    send_requested = Signal()
    stop_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.edit_banner = QLabel(visible=False, objectName="editBanner")
        self.composer = Composer(placeholderText="Message the model (Enter sends, Shift+Enter for a new line)")
        self.composer.setMaximumHeight(110)
        self.send_button = QPushButton("Send", objectName="primary")
        self.stop_button = QPushButton("Stop", visible=False, objectName="danger")
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.composer, 1)
        row.addLayout(buttons)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.edit_banner)
        lay.addLayout(row)
        self.composer.submitted.connect(self.send_requested)
        self.composer.cancelled.connect(self.cancel_requested)
        self.send_button.clicked.connect(self.send_requested)
        self.stop_button.clicked.connect(self.stop_requested)

    def text(self) -> str:
        return self.composer.toPlainText()

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
