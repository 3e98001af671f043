"""The Settings page's Prompt cache group: on/off, the size cap, the folder's size in use, and Clear.

The choices live in the app's preferences (``prompt_cache``, copied into ``Settings`` at start-up by
``app/bridge/prompt_cache.py``) and in ``Settings`` on every change, and each change reaches the loaded
models at once (``bridge.prompt_cache.choose``); the folder is read and cleared through the bridge.
"""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
)

from fireside.engine.fmt import human_bytes

from ..context import AppContext
from ..feedback import show_error


class PromptCacheBox(QGroupBox):
    """Settings: keep conversations' KV states on disk, how much, and how much it holds now.

    Signals: none (each change is saved and applied at once)."""

    def __init__(self, ctx: AppContext):
        super().__init__("Prompt cache")
        self.ctx = ctx
        s = ctx.settings
        self.enabled = QCheckBox("Resume conversations from disk (keeps each chat's KV cache after a reply)",
                                 checked=s.prompt_cache)
        self.enabled.toggled.connect(self._on_enabled_toggled)
        self.cap = QDoubleSpinBox(minimum=0.25, maximum=1024.0, singleStep=0.5, suffix=" GiB", decimals=2)
        self.cap.setValue(s.prompt_cache_cap_bytes / 2**30)
        self.cap.valueChanged.connect(self._on_cap_changed)
        self.size = QLabel("…", objectName="cacheSize")
        self.clear = QPushButton("Clear")
        self.clear.setToolTip("Delete every saved state; the next turn of each chat evaluates its history again")
        self.clear.clicked.connect(self._on_clear_clicked)
        row = QHBoxLayout()
        row.addWidget(self.size, 1)
        row.addWidget(self.clear)
        form = QFormLayout(self)
        form.addRow(self.enabled)
        form.addRow("Size cap", self.cap)
        form.addRow("In use", row)
        form.addRow(QLabel(f"<small>{s.prompt_cache_dir} · the least recently used states go first; changes "
                           "apply at once</small>", wordWrap=True))
        self.refresh()

    def _save(self, **choice) -> None:
        self.ctx.prefs.set("prompt_cache", {"enabled": self.enabled.isChecked(), "cap_gib": self.cap.value()})
        self.ctx.bridge.prompt_cache.choose(**choice)  # loaded models follow at once

    @Slot(bool)
    def _on_enabled_toggled(self, on: bool) -> None:
        self._save(enabled=on)

    @Slot(float)
    def _on_cap_changed(self, gib: float) -> None:
        self._save(cap_bytes=int(gib * 2**30))

    @Slot()
    def refresh(self) -> None:
        self.ctx.bridge.prompt_cache.usage(self._on_size_read)

    @Slot()
    def _on_clear_clicked(self) -> None:
        self.ctx.bridge.prompt_cache.clear(lambda _n, _e: self.refresh())

    def _on_size_read(self, result, error) -> None:
        if error:
            show_error(error, "reading the prompt cache")
            return
        size, n = result
        self.size.setText(f"{human_bytes(size)} in {n} saved state{'s' if n != 1 else ''}")
        self.clear.setEnabled(n > 0 or size > 0)
