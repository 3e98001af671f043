"""Settings page (placeholder)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ..context import AppContext


class SettingsPage(QWidget):
    """Settings. Signals: none."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        QVBoxLayout(self).addWidget(QLabel("Settings"))

