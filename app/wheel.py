"""The mouse wheel scrolls pages, not settings: a combo box, slider or spin box takes wheel events only once
the user has focused it (clicked it or tabbed to it). Without this, scrolling Settings changed whatever
control passed under the pointer (the documents' embedder among them, which re-embeds every collection).

``WheelGuard`` is one event filter on the application, so every such control of every page, present or
future, is covered. A wheel event over an unfocused control is ignored and handed on, so the scroll area
around it scrolls instead (``QApplication::notify`` passes an ignored wheel event to the parent). The
controls also stop taking focus from the wheel itself (``Qt.WheelFocus`` becomes ``Qt.StrongFocus``), or
the first notch would focus them and the second would change them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QAbstractSlider, QAbstractSpinBox, QComboBox, QScrollBar

GUARDED = (QComboBox, QAbstractSpinBox, QAbstractSlider)  # sliders and dials; a scroll bar is one, and scrolls


def _guarded(obj) -> bool:
    return isinstance(obj, GUARDED) and not isinstance(obj, QScrollBar)


class WheelGuard(QObject):
    """An application-wide event filter; ``install`` puts it on the running ``QApplication``."""

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt's name
        kind = event.type()
        if kind == QEvent.Wheel and _guarded(obj) and not obj.hasFocus():
            event.ignore()  # not taken: the scroll area behind it gets it
            return True
        if kind == QEvent.Polish and _guarded(obj) and obj.focusPolicy() == Qt.WheelFocus:
            obj.setFocusPolicy(Qt.StrongFocus)
        return False

    @classmethod
    def install(cls, app) -> WheelGuard:
        guard = cls(app)
        app.installEventFilter(guard)
        return guard
