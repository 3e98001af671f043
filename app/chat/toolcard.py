"""A tool call in the transcript: which server and tool, the full arguments, and what came back.

While a call waits for approval its card is open and shows everything the call would do: the server,
the tool and its arguments pretty-printed in a scrollable box, with Run, Deny, "Always allow in this
chat" and "Always allow this tool". Once answered it folds to one line (``tests › weather · ran``)
that opens to show the arguments and the result. The result is a third-party program's output, so it
is shown in a plain-text box: never rendered as HTML, no links to click.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QFontDatabase, QTextDocument
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ..store import Message

STATUS = {"pending": "wants to run: approve it?", "running": "running…", "run": "ran", "denied": "denied by you",
          "error": "failed", "cancelled": "stopped before it ran", "stopped": "not run (stopped)"}
DECISIONS = (("run", "Run", "primary"), ("deny", "Deny", "danger"),
             ("chat", "Always allow in this chat", ""), ("always", "Always allow this tool", ""))


def status_of(msg: Message) -> str:
    """What became of the call, in words: from its outcome once it has one, else from its state."""
    outcome = msg.tool.get("outcome")
    if outcome:
        return STATUS.get(outcome, outcome)
    return STATUS.get(msg.state, msg.state)


class _TextBox(QPlainTextEdit):
    """Read-only monospaced plain text, as tall as its wrapped lines up to ``most`` pixels; then it scrolls."""

    def __init__(self, name: str, most: int):
        super().__init__(readOnly=True, objectName=name)
        self.most = most
        self.setFont(QFontDatabase.systemFont(QFontDatabase.FixedFont))
        self.setLineWrapMode(QPlainTextEdit.WidgetWidth)
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Fixed)

    def show_text(self, text: str) -> None:
        self.setPlainText(text)
        self._fit()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self._fit()

    def _fit(self) -> None:
        text = self.toPlainText()
        if len(text) > 8000:  # surely taller than the limit; not worth laying out twice
            self.setFixedHeight(self.most)
            return
        # QPlainTextEdit lays out only the lines on show, so measure the wrapped text in a document.
        probe = QTextDocument()
        probe.setDefaultFont(self.font())
        probe.setDocumentMargin(self.document().documentMargin())
        probe.setPlainText(text)
        probe.setTextWidth(max(40, self.viewport().width()))
        self.setFixedHeight(min(self.most, int(probe.size().height()) + 2 * self.frameWidth() + 4))


class ToolCallView(QFrame):
    """One tool call's card.

    Signals:
        decided(int, str): message id, the user's answer (``run``, ``deny``, ``chat`` or ``always``).
    """

    decided = Signal(int, str)

    def __init__(self, message: Message, parent: QWidget | None = None):
        super().__init__(parent)
        self.message = message
        self.setObjectName("toolCall")
        self._build()
        self.set_message(message)

    def _build(self) -> None:
        self.toggle = QToolButton(checkable=True, autoRaise=True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.toggle.toggled.connect(self._on_toggle_toggled)
        self.title = QLabel(wordWrap=True)  # while waiting: what asks to run, in words that cannot be missed
        self.title.setTextFormat(Qt.PlainText)
        self.details = QWidget()
        self.arguments = _TextBox("toolArguments", 220)
        self.result = _TextBox("toolResult", 240)
        self.result_label = QLabel("<b>What went back to the model</b> (plain text)")
        inner = QVBoxLayout(self.details)
        inner.setContentsMargins(0, 0, 0, 0)
        inner.addWidget(QLabel("<b>Arguments</b>"))
        inner.addWidget(self.arguments)
        inner.addWidget(self.result_label)
        inner.addWidget(self.result)
        self.buttons = QWidget()
        self._decision_row()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(12, 8, 12, 8)
        lay.addWidget(self.toggle)
        lay.addWidget(self.title)
        lay.addWidget(self.details)
        lay.addWidget(self.buttons)

    def _decision_row(self) -> None:
        row = QHBoxLayout(self.buttons)
        row.setContentsMargins(0, 0, 0, 0)
        self.decision_buttons: dict[str, QPushButton] = {}
        for decision, text, style in DECISIONS:
            button = QPushButton(text, objectName=style)
            button.clicked.connect(self._on_decision_clicked)
            button.setProperty("decision", decision)
            row.addWidget(button)
            self.decision_buttons[decision] = button
        row.addStretch(1)

    def set_message(self, message: Message) -> None:
        self.message = message
        tool = message.tool
        pending = message.state == "pending"
        where = f"{tool.get('server') or '?'} › {tool.get('tool') or tool.get('function') or '?'}"
        self.toggle.setText(f"Tool call: {where} · {status_of(message)}")
        self.title.setText(f"{where} wants to run. Run it with these arguments?")
        font = self.title.font()
        font.setBold(True)
        self.title.setFont(font)
        self.arguments.show_text(tool.get("arguments") or "{}")
        self.result.show_text(message.content)
        has_result = bool(message.content) and not pending
        self.result.setVisible(has_result)
        self.result_label.setVisible(has_result)
        self.buttons.setVisible(pending)
        # A call awaiting approval stays open, with a title instead of the fold: you see what you approve.
        self.toggle.setVisible(not pending)
        self.title.setVisible(pending)
        self.toggle.setChecked(pending or (self.toggle.isChecked() and message.state == "running"))
        self._on_toggle_toggled(self.toggle.isChecked())
        self.setProperty("state", message.state)
        self.style().unpolish(self)
        self.style().polish(self)

    def set_busy(self, _busy: bool) -> None:
        """Cards follow the chat being busy; a tool call's buttons are for the call, so they stay."""

    @Slot(bool)
    def _on_toggle_toggled(self, shown: bool) -> None:
        self.details.setVisible(shown)
        self.toggle.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)

    @Slot()
    def _on_decision_clicked(self) -> None:
        decision = self.sender().property("decision")
        for button in self.decision_buttons.values():
            button.setEnabled(False)  # one answer per call; the card turns to "running" or "denied"
        self.decided.emit(self.message.id, decision)
