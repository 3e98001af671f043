"""The top of the "Your devices" tab (``devices.py``): this computer, as the devices paired with it see it.

The switch that shares this computer on the local network (as ``fireside serve --share``: TLS, announced by
mDNS), whether it lends memory to paired devices and how much (``--lend GIB``), whether it is sharing and where, this device's name and certificate fingerprint, and "Show pairing
code", which opens a one-time code for the other device to type, counted down each second until it expires.
Sharing starts and stops through the bridge's ``DevicesController`` (``app/bridge/devices.py``), on workers;
the switch remembers its state in the ``sharing`` preferences, so the main window can share again at the next
start (``resume_sharing``).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Slot
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QVBoxLayout, QWidget

from ..bridge import SHARE_PORT, short_fingerprint
from ..bridge.devices import ShareConfig, ThisDevice
from ..context import AppContext
from ..feedback import show_error


class SharingBar(QWidget):
    """The share switch, this device's name and fingerprint, and its pairing code."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.devices = ctx.bridge.devices
        self._code_expires = 0.0
        self._code_text = ""
        self.devices.identity_read.connect(self._on_devices_identity_read)
        self.devices.sharing_started.connect(self._on_devices_sharing_started)
        self.devices.sharing_stopped.connect(self._on_devices_sharing_stopped)
        self._build()
        self._code_timer = QTimer(self, interval=1000)
        self._code_timer.timeout.connect(self._on_code_timer_timeout)

    def prefs(self) -> dict:
        return self.ctx.prefs.get("sharing") or {}

    def resume_sharing(self) -> bool:
        """Share again if sharing was on when the app last quit (the main window calls this once it shows,
        so the listener's start does not slow the first window, and says so); whether it does."""
        if not self.prefs().get("on") or self.share.isChecked():
            return False
        self.share.setChecked(True)
        return True

    def _build(self) -> None:
        self.share = QCheckBox("Share this computer's models with my paired devices on the local network")
        self.share.setToolTip("As `fireside serve --share`: a TLS listener that only paired devices can use, "
                              "announced by mDNS so your other devices find it")
        self.share.toggled.connect(self._on_share_toggled)
        self.share_state = QLabel("Not sharing", objectName="shareState")
        self.lend = QCheckBox("Lend up to", toolTip=(
            "Paired devices may place a model's layers in this computer's memory and run them on its CPU "
            "(`fireside serve --share --lend GIB`): a model too big for one machine runs across both"))
        self.lend_gib = QSpinBox(minimum=1, maximum=1024, suffix=" GiB of memory")
        lend = self.prefs().get("lend_gib")
        self.lend.setChecked(bool(lend))
        self.lend_gib.setValue(int(lend or 4))
        self.lend.toggled.connect(self._on_lend_changed)
        self.lend_gib.valueChanged.connect(self._on_lend_changed)
        self.me = QLabel(textInteractionFlags=Qt.TextSelectableByMouse)
        self.code_button = QPushButton("Show pairing code", enabled=False)
        self.code_button.clicked.connect(self._on_code_clicked)
        self.code = QLabel(objectName="pairingCode", textInteractionFlags=Qt.TextSelectableByMouse)
        top = QHBoxLayout()
        top.addWidget(self.share)
        top.addWidget(self.share_state, 1)
        top.addWidget(self.lend)
        top.addWidget(self.lend_gib)
        me = QHBoxLayout()
        me.addWidget(self.me, 1)
        me.addWidget(self.code)
        me.addWidget(self.code_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)  # two rows of the tab's own layout, as they look there
        lay.addLayout(top)
        lay.addLayout(me)

    @Slot()
    def _on_lend_changed(self, *_args) -> None:
        """Kept in the preferences; it takes effect when sharing starts (the controls are locked meanwhile)."""
        self.ctx.prefs.set("sharing", {**self.prefs(), "lend_gib": self.lend_gib.value() if self.lend.isChecked() else 0})

    @Slot(bool)
    def _on_share_toggled(self, on: bool) -> None:
        prefs = self.prefs()
        self.ctx.prefs.set("sharing", {**prefs, "on": on})
        self.share.setEnabled(False)
        for w in (self.lend, self.lend_gib):
            w.setEnabled(not on)  # lending is set as sharing starts: stop sharing to change it
        if on:
            self.share_state.setText("Starting…")
            self.devices.start_sharing(ShareConfig(prefs.get("host", "0.0.0.0"), int(prefs.get("port", SHARE_PORT)),
                                                   prefs.get("name"), bool(prefs.get("announce", True)),
                                                   float(prefs.get("lend_gib") or 0) or None))
        else:
            self.share_state.setText("Stopping…")
            self.devices.stop_sharing()

    @Slot(object)
    def _on_devices_identity_read(self, device: ThisDevice) -> None:
        if not self.devices.shared:
            self._show_me(device)

    @Slot(object)
    def _on_devices_sharing_started(self, device: ThisDevice) -> None:
        self.share.setEnabled(True)
        lent = self.devices.sharing.lender if self.devices.sharing is not None else None
        lending = f", lending up to {lent.cap_bytes / 2**30:g} GiB" if lent is not None else ""
        self.share_state.setText(f"<b>Sharing</b> on {device.url} (TLS){lending}")
        self.share_state.setToolTip("Paired devices reach this computer at " + ", ".join(device.urls or (device.url,)))
        self.code_button.setEnabled(True)
        self._show_me(device)

    @Slot()
    def _on_devices_sharing_stopped(self) -> None:
        self.share.setEnabled(True)
        self.share.blockSignals(True)  # a failed start unticks the switch without stopping anything
        self.share.setChecked(False)
        self.share.blockSignals(False)
        self.share_state.setText("Not sharing")
        for w in (self.lend, self.lend_gib):
            w.setEnabled(True)
        self.code_button.setEnabled(False)
        self._end_code()

    def _show_me(self, device: ThisDevice) -> None:
        self.me.setText(f"This device: <b>{device.name}</b> · certificate fingerprint "
                        f"<tt>{short_fingerprint(device.fingerprint)}</tt>")
        self.me.setToolTip(f"SHA-256 {device.fingerprint}")

    @Slot()
    def _on_code_clicked(self) -> None:
        try:
            code, valid_s, tries = self.devices.open_code()
        except Exception as exc:
            show_error(exc, "opening a pairing code")
            return
        self._code_expires = time.monotonic() + valid_s
        self._code_text = f"Pairing code: <b>{code}</b> ({tries} tries)"
        self._on_code_timer_timeout()
        self._code_timer.start()

    @Slot()
    def _on_code_timer_timeout(self) -> None:
        left = int(self._code_expires - time.monotonic())
        if left <= 0:
            self._end_code()
            return
        self.code.setText(f"{self._code_text} · expires in {left // 60}:{left % 60:02d}")

    def _end_code(self) -> None:
        self._code_timer.stop()
        self.code.clear()

    def dispose(self) -> None:
        self._code_timer.stop()
