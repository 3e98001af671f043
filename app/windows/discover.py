"""Discover: search the hub (filled in below once the hub lands)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ..context import AppContext


class DiscoverPage(QWidget):
    """Search the Hugging Face hub for GGUF models. Signals: none."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        QVBoxLayout(self).addWidget(QLabel("Discover"))
