"""The model bar above a chat: pick a model, load it with progress (cancellable), tune its load settings,
eject it. The list comes from the library, the remote engines and the paired devices on a worker (a
device's models under a line "On DEVICE", as ``DEVICE/MODEL``); loads are the app's ``ModelLoader``
(``bridge/loader.py``), which the bar only asks and shows: what a load leaves in the preferences (the
model's settings, its "Last used") is the loader's. ``ChosenModel`` is what the chat session gets of it:
the bar's choice and the loader, no widget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ..bridge import STARTER_ID, LoadOptions, is_remote
from ..context import AppContext
from ..feedback import show_error
from ..windows.load_dialog import LoadDialog

VISION_MARK = "  · sees images"  # after a vision model's name in the list
DEVICE_HEADER = "On {}"  # the line above a paired device's models
REMOTE_RETRIES = 5  # a remote that did not answer is asked again this many times, then on the next reload
REMOTE_RETRY_MS = 4000


class ModelBar(QWidget):
    """Model picker with load progress.

    Signals:
        model_chosen(str): the user picked a model for this chat.
        model_ready(str): a model finished loading and can answer (the loader's, passed on).
    """

    model_chosen = Signal(str)
    model_ready = Signal(str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx, self.loader = ctx, ctx.loader
        self._remote_retries = 0
        self.vision: set[str] = set()
        self.on_device: dict[str, str] = {}  # a paired device's model id -> the device's name
        self._remote_retry = QTimer(self, singleShot=True, interval=REMOTE_RETRY_MS)  # dies with the bar
        self._remote_retry.timeout.connect(self.reload_list)
        self.combo = QComboBox(minimumWidth=160, maximumWidth=340)
        self.combo.setPlaceholderText("Choose a model")
        self.combo.activated.connect(self._on_combo_activated)
        self.settings_button = QPushButton("Load…", toolTip="Load settings: GPU layers, context length, KV cache")
        self.settings_button.clicked.connect(self._on_settings_clicked)
        self.eject_button = QPushButton("Eject", toolTip="Unload this model and free its memory")
        self.eject_button.clicked.connect(self._on_eject_clicked)
        self.progress = QProgressBar(maximum=100, visible=False, maximumWidth=220)
        self.cancel_button = QPushButton("Cancel", visible=False)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.state = QLabel(objectName="modelState")
        self.state.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)  # long states must not widen the window
        row = QHBoxLayout()
        for w in (self.combo, self.settings_button, self.eject_button, self.progress, self.cancel_button):
            row.addWidget(w)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addLayout(row)
        lay.addWidget(self.state)
        ctx.bridge.load_progress.connect(self._on_bridge_load_progress)
        self.loader.started.connect(self._on_loader_started)
        self.loader.ended.connect(self._on_loader_ended)
        self.loader.model_ready.connect(self.model_ready)
        ctx.bridge.loaded_changed.connect(self._on_bridge_loaded_changed)
        self.reload_list()

    def reload_list(self) -> None:
        """Local models, then the remote engines' (asked on a worker; a remote busy or starting up that
        did not answer is asked again a few times)."""
        self.ctx.bridge.model_ids(self._on_listed)

    def _on_listed(self, listed, error) -> None:
        if error:
            show_error(error, "listing models")
            listed = ([STARTER_ID], False, set(), {})
        ids, remote_missing, vision, on_device = listed
        if remote_missing and self._remote_retries < REMOTE_RETRIES:
            self._remote_retries += 1
            self._remote_retry.start()
        elif not remote_missing:
            self._remote_retries = 0
        current = self.current()
        self.vision, self.on_device = set(vision), dict(on_device)
        self.combo.clear()
        for model_id in ids:  # the text shows the mark; the item's data is the model id
            device = self.on_device.get(model_id)
            if device and self.combo.findText(DEVICE_HEADER.format(device)) < 0:
                self._add_header(DEVICE_HEADER.format(device))
            self.combo.addItem(model_id + (VISION_MARK if model_id in self.vision else ""), model_id)
            if model_id in self.vision:
                self.combo.setItemData(self.combo.count() - 1, f"{model_id} can see images: attach them to a "
                                       "message", Qt.ToolTipRole)
            elif device:
                self.combo.setItemData(self.combo.count() - 1, f"runs on your device {device}, over the local "
                                       "network (encrypted)", Qt.ToolTipRole)
        if current:
            self.set_model(current)  # (and the state line says whether it sees images)

    def _add_header(self, text: str) -> None:
        """A line that names the group below it; it cannot be chosen (no data, not enabled)."""
        self.combo.addItem(text)
        item = self.combo.model().item(self.combo.count() - 1)
        item.setEnabled(False)
        font = item.font()
        font.setBold(True)
        item.setFont(font)

    def current(self) -> str | None:
        return self.combo.currentData() or None

    def sees_images(self, model_id: str | None) -> bool:
        """Whether the library says ``model_id`` can see images (as of the last listing)."""
        return model_id in self.vision

    def set_model(self, model_id: str | None) -> None:
        if model_id and self.combo.findData(model_id) < 0:
            self.combo.addItem(model_id, model_id)
        self.combo.setCurrentIndex(self.combo.findData(model_id) if model_id else -1)
        self._on_bridge_loaded_changed()

    @property
    def loading(self) -> str | None:
        return self.loader.loading

    @Slot(str)
    def _on_loader_started(self, model_id: str) -> None:
        self.progress.setValue(0)
        self.progress.setFormat(f"Loading {model_id}… %p%")
        self.progress.show()
        self.cancel_button.show()
        self.state.clear()

    @Slot(str)
    def _on_loader_ended(self, _model_id: str) -> None:
        self.progress.hide()
        self.cancel_button.hide()

    @Slot(int)
    def _on_combo_activated(self, _index: int) -> None:
        model_id = self.current()
        if model_id:
            self.model_chosen.emit(model_id)
            self.loader.ensure_loaded(model_id)

    @Slot()
    def _on_settings_clicked(self) -> None:
        model_id = self.current()
        if not model_id:
            return
        dialog = LoadDialog(self.ctx, model_id, self, save_on_accept=False)
        dialog.accepted.connect(lambda: self.loader.load(model_id, dialog.options() or LoadOptions(), remember=True))
        dialog.open()

    @Slot()
    def _on_eject_clicked(self) -> None:
        if self.current():
            self.ctx.bridge.unload(self.current())

    @Slot()
    def _on_cancel_clicked(self) -> None:
        self.loader.cancel()

    @Slot(str, float)
    def _on_bridge_load_progress(self, model_id: str, fraction: float) -> None:
        if model_id == self.loading:
            self.progress.setValue(int(fraction * 100))

    @Slot()
    def _on_bridge_loaded_changed(self) -> None:
        model_id = self.current()
        loaded = {m.model_id: m for m in self.ctx.engine.loaded()}
        self.eject_button.setEnabled(model_id in loaded)
        sees = " · sees images" if self.sees_images(model_id) else ""
        if model_id in loaded:
            self.state.setText(f"Loaded · context {loaded[model_id].n_ctx:,}{sees}")
        elif model_id in self.on_device:
            self.state.setText(f"On your device {self.on_device[model_id]}: it runs there")
        elif is_remote(model_id):
            self.state.setText("Remote model: it runs on its own server")
        elif self.loading != model_id:
            self.state.setText(f"Not loaded: sending a message loads it{sees}" if model_id else "")

    def context_size(self, model_id: str | None) -> int:
        loaded = {m.model_id: m for m in self.ctx.engine.loaded()}
        return loaded[model_id].n_ctx if model_id in loaded else 0


@dataclass
class ChosenModel:
    """What the Chat page hands its session: the model on show (the picker's choice) and the loader
    (``bridge/loader.py``) that makes it ready, no widget in between."""

    current: Callable[[], str | None]
    loader: Any

    def ensure_loaded(self, model_id: str) -> bool:
        return self.loader.ensure_loaded(model_id)
