"""The Settings page: theme, models folders, the Hugging Face token (in the OS keyring, with a clear
notice where none exists), the remote engines (``remotes.RemotesBox``), this machine's hardware as
llama.cpp sees it, default load settings, and whether closing the window keeps a running server in the tray.

The keyring, the hardware and the remembered workarounds are read through the bridge, on workers; the
token's state and the no-keyring notice appear when the answer comes back.
"""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.fmt import human_bytes

from ..bridge import engine_build
from ..context import AppContext
from ..feedback import show_error
from ..theme import apply_theme
from .cache_settings import PromptCacheBox
from .documents_settings import DocumentsBox
from .remotes import RemotesBox

THEMES = {"System": "system", "Light": "light", "Dark": "dark"}


class SettingsPage(QWidget):
    """Preferences. Signals: none (each change is saved and applied at once)."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        inner = QWidget()
        column = QVBoxLayout(inner)
        column.setContentsMargins(24, 16, 24, 16)
        self.remotes = RemotesBox(ctx)
        self.prompt_cache = PromptCacheBox(ctx)
        self.documents = DocumentsBox(ctx)
        for box in (self._appearance(), self._folders(), self._token(), self.remotes, self._defaults(),
                    self.documents, self.prompt_cache, self._hardware()):
            column.addWidget(box)
        column.addStretch(1)
        scroll = QScrollArea(widgetResizable=True)
        scroll.setWidget(inner)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(scroll)
        self.refresh_hardware()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self.documents.refresh()  # a model pulled or deleted since: the embedders listed follow
        self.prompt_cache.refresh()  # replies since have saved states (it read "0 B in 0 saved states")

    # --- sections --------------------------------------------------------------------------------
    def _appearance(self) -> QGroupBox:
        box = QGroupBox("Appearance and behaviour")
        self.theme = QComboBox()
        self.theme.addItems(list(THEMES))
        self.theme.setCurrentText(next(k for k, v in THEMES.items() if v == self.ctx.prefs.get("theme")))
        self.theme.currentTextChanged.connect(self._on_theme_changed)
        self.tray = QCheckBox("Closing the window keeps a running server in the tray")
        self.tray.setChecked(bool(self.ctx.prefs.get("keep_server_in_tray")))
        self.tray.toggled.connect(self._on_tray_toggled)
        form = QFormLayout(box)
        form.addRow("Theme", self.theme)
        form.addRow(self.tray)
        return box

    def _folders(self) -> QGroupBox:
        box = QGroupBox("Models folders")
        self.folders = QListWidget(maximumHeight=110)
        add = QPushButton("Add folder…")
        add.clicked.connect(self._on_add_folder_clicked)
        self.remove_folder = QPushButton("Remove")
        self.remove_folder.clicked.connect(self._on_remove_folder_clicked)
        buttons = QHBoxLayout()
        buttons.addWidget(add)
        buttons.addWidget(self.remove_folder)
        buttons.addStretch(1)
        lay = QVBoxLayout(box)
        lay.addWidget(QLabel("Fireside lists every GGUF model in these folders. Downloads go to the first one."))
        lay.addWidget(self.folders)
        lay.addLayout(buttons)
        self.show_folders()
        return box

    def _token(self) -> QGroupBox:
        box = QGroupBox("Hugging Face token")
        self.token = QLineEdit(echoMode=QLineEdit.Password, placeholderText="hf_… (needed for gated models only)")
        save = self.save_token = QPushButton("Save", enabled=False)  # until the keyring is known to exist
        save.clicked.connect(self._on_save_token_clicked)
        forget = self.remove_token = QPushButton("Remove", enabled=False)
        forget.clicked.connect(self._on_remove_token_clicked)
        self.token_state = QLabel("Checking the keyring…")
        self.keyring_notice = QLabel(objectName="notice", wordWrap=True, visible=False)
        self.keyring_notice.setText(
            "No OS keyring is available on this machine, so Fireside cannot keep a token safely. Install and "
            "unlock one (GNOME Keyring or KWallet on Linux), or set HF_TOKEN in the environment for a session. "
            "Public models download without a token.")
        row = QHBoxLayout()
        row.addWidget(self.token, 1)
        row.addWidget(save)
        row.addWidget(forget)
        lay = QVBoxLayout(box)
        lay.addWidget(self.keyring_notice)
        lay.addLayout(row)
        lay.addWidget(self.token_state)
        self._show_token_state()
        return box

    def _defaults(self) -> QGroupBox:
        box = QGroupBox("Default load settings (a model's own settings win)")
        saved = self.ctx.prefs.get("default_load") or {}
        self.default_context = QSpinBox(minimum=0, maximum=1 << 20, singleStep=1024, specialValueText="Auto")
        self.default_context.setValue(saved.get("context") or 0)
        self.default_kv = QComboBox()
        self.default_kv.addItems(["f16", "q8_0", "q4_0"])
        self.default_kv.setCurrentText(saved.get("kv_type", "f16"))
        self.default_context.valueChanged.connect(self._on_defaults_changed)
        self.default_kv.currentTextChanged.connect(self._on_defaults_changed)
        form = QFormLayout(box)
        form.addRow("Context length", self.default_context)
        form.addRow("KV cache", self.default_kv)
        return box

    def _hardware(self) -> QGroupBox:
        box = QGroupBox("Hardware")
        self.hardware = QLabel("Detecting…", wordWrap=True)
        refresh = QPushButton("Refresh")
        refresh.clicked.connect(self.refresh_hardware)
        self.workarounds = QLabel("", wordWrap=True)
        self.clear_workarounds = QPushButton("Forget workarounds")
        self.clear_workarounds.setToolTip("The next load of each model tries llama.cpp's full configuration again")
        self.clear_workarounds.clicked.connect(self._on_clear_workarounds_clicked)
        lay = QVBoxLayout(box)
        lay.addWidget(self.hardware)
        lay.addWidget(self.workarounds)
        buttons = QHBoxLayout()
        buttons.addWidget(refresh)
        buttons.addWidget(self.clear_workarounds)
        buttons.addStretch(1)
        lay.addLayout(buttons)
        return box

    # --- behaviour -------------------------------------------------------------------------------
    @Slot(str)
    def _on_theme_changed(self, label: str) -> None:
        self.ctx.prefs.set("theme", THEMES[label])
        apply_theme(THEMES[label])

    @Slot(bool)
    def _on_tray_toggled(self, on: bool) -> None:
        self.ctx.prefs.set("keep_server_in_tray", on)

    def show_folders(self) -> None:
        self.folders.clear()
        self.folders.addItems([str(p) for p in self.ctx.settings.models_dirs])
        self.remove_folder.setEnabled(len(self.ctx.settings.models_dirs) > 1)

    @Slot()
    def _on_add_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a models folder")
        if folder:
            self.add_folder(Path(folder))

    def add_folder(self, folder: Path) -> None:
        if folder not in self.ctx.settings.models_dirs:
            self.ctx.settings.models_dirs.append(folder)
        self._save_folders()

    @Slot()
    def _on_remove_folder_clicked(self) -> None:
        row = self.folders.currentRow()
        if row <= 0:
            show_error("The first models folder receives downloads and stays; pick another to remove")
            return
        del self.ctx.settings.models_dirs[row]
        self._save_folders()

    def _save_folders(self) -> None:
        self.ctx.prefs.set("models_dirs", [str(p) for p in self.ctx.settings.models_dirs[1:]])
        self.show_folders()

    def _show_token_state(self) -> None:
        self.ctx.bridge.token_state(self._on_token_state_read)

    def _on_token_state_read(self, state, error) -> None:
        if error is not None:
            show_error(error, "reading the keyring")
            state = (False, False)
        available, saved = state
        self.keyring_notice.setVisible(not available)
        for button in (self.save_token, self.remove_token):  # nowhere to keep a token: nothing to press
            button.setEnabled(available)
            button.setToolTip("" if available else "No OS keyring on this machine: see the notice above")
        self.token_state.setText("A token is saved in the keyring." if saved else "No token saved.")

    @Slot()
    def _on_save_token_clicked(self) -> None:
        self.ctx.bridge.save_token(self.token.text(), self._on_token_saved)

    def _on_token_saved(self, _result, error) -> None:
        if error is not None:
            show_error(error, "saving the token")
            return
        self.token.clear()
        self._show_token_state()

    @Slot()
    def _on_remove_token_clicked(self) -> None:
        self.ctx.bridge.delete_token(self._on_token_removed)

    def _on_token_removed(self, _result, error) -> None:
        if error is not None:
            show_error(error, "removing the token")
        self._show_token_state()

    @Slot()
    def _on_defaults_changed(self, *_args) -> None:
        values = {"kv_type": self.default_kv.currentText()}
        if self.default_context.value():
            values["context"] = self.default_context.value()
        self.ctx.prefs.set("default_load", values)

    @Slot()
    def refresh_hardware(self) -> None:
        self.ctx.bridge.hardware(self._on_hardware_detected)
        self.ctx.bridge.workarounds(self._on_workarounds_read)

    @Slot()
    def _on_clear_workarounds_clicked(self) -> None:
        self.ctx.bridge.clear_workarounds(lambda _n, _e: self.refresh_hardware())

    def _on_workarounds_read(self, entries, error) -> None:
        if error:
            show_error(error, "reading the workarounds")
            return
        self.workarounds.setText("<br>".join(
            f"<b>Workaround:</b> {html.escape(w['model'])} loads with {html.escape(w['description'])}: "
            f"llama.cpp {html.escape(w['reason'])} in this build without it." for w in entries))
        self.workarounds.setVisible(bool(entries))
        self.clear_workarounds.setVisible(bool(entries))

    def _on_hardware_detected(self, hw, error) -> None:
        if error:
            self.hardware.setText(f"Could not read the devices: {error}")
            return
        lines = [f"<b>Backends:</b> {', '.join(hw.backends) or 'none'}",
                 f"<b>CPU:</b> {hw.cpu_cores} cores, {hw.cpu_threads} threads",
                 f"<b>RAM:</b> {human_bytes(hw.ram_available_bytes)} free of {human_bytes(hw.ram_total_bytes)}"]
        for d in hw.devices:
            lines.append(f"<b>{d.name}</b> ({d.backend}, {d.kind}): {d.description} · "
                         f"{human_bytes(d.free_bytes)} free of {human_bytes(d.total_bytes)}")
        if hw.llama_cpp_version:
            lines.append(f"<b>llama.cpp:</b> {hw.llama_cpp_version}")
        lines.append(f"<b>Engine build:</b> {engine_build(hw)}")
        lines += [f"<i>{n}</i>" for n in hw.notes]
        self.hardware.setText("<br>".join(lines))
