"""The mouse wheel scrolls pages and changes no setting it passes over (issue 45: scrolling Settings turned
the documents' embedder from None to the chat model, which loaded a second copy and re-embedded every
collection). A combo box, spin box or slider takes the wheel only once the user has focused it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import (
    QAbstractSlider,
    QAbstractSpinBox,
    QApplication,
    QComboBox,
    QScrollArea,
    QScrollBar,
)

from fireside.engine.documents.embedding import chosen_embedder
from fireside.engine.settings import Settings

GUARDED = (QComboBox, QAbstractSpinBox, QAbstractSlider)


def wheel(widget, notches: int = -1) -> None:
    """One wheel turn over the middle of ``widget`` (negative: towards the user, scrolling down)."""
    middle = widget.rect().center()
    event = QWheelEvent(QPointF(middle), QPointF(widget.mapToGlobal(middle)), QPoint(), QPoint(0, 120 * notches),
                        Qt.NoButton, Qt.NoModifier, Qt.NoScrollPhase, False)
    QApplication.sendEvent(widget, event)


def _value(widget):
    return widget.currentIndex() if isinstance(widget, QComboBox) else widget.value()


def test_the_wheel_over_settings_changes_nothing_until_a_control_is_focused(qtbot, app):
    window = app.window
    window.show_page("Settings")
    page = window.pages["Settings"]
    box = page.documents
    qtbot.waitUntil(lambda: box.embedder.count() > 1, timeout=10_000)  # None, and the models to pick
    chosen = chosen_embedder(Settings.from_env())  # the built-in one, by default
    controls = [w for kind in GUARDED for w in page.findChildren(kind)
                if w.isVisible() and not isinstance(w, QScrollBar)]
    assert box.embedder in controls and page.default_kv in controls and page.default_context in controls
    for control in controls:
        assert control.focusPolicy() != Qt.WheelFocus, control  # a real wheel would focus it first
        before = _value(control)
        wheel(control, -1)
        wheel(control, +1)
        wheel(control, -1)
        assert _value(control) == before, control.objectName() or type(control).__name__
    assert not box.confirm.isVisible()
    assert chosen_embedder(Settings.from_env()) == chosen and not app.ctx.prefs.get("default_load")

    scroll = page.findChild(QScrollArea)
    assert scroll.verticalScrollBar().maximum() > 0  # the page is taller than the window
    wheel(scroll.viewport(), -2)  # the page itself still scrolls: its scroll bar is no setting
    assert scroll.verticalScrollBar().value() > 0

    page.default_kv.setFocus()  # clicked or tabbed to: now the wheel is the user's choice
    qtbot.waitUntil(page.default_kv.hasFocus)
    wheel(page.default_kv, -1)
    assert page.default_kv.currentText() == "f16"  # the one after auto
