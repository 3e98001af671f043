"""The "Your devices" tab of the Server page: share this computer's models with your other machines, and
use theirs.

At the top, this computer as the others see it (``sharing.py``: the switch that shares it on the local
network, its name and certificate fingerprint, and "Show pairing code"). Below, two lists: the devices
sharing on the network (live, from mDNS), with Pair (it asks for the code the other device shows), and the
paired devices, with whether each answers and how many models it lists, Forget or Revoke, and Move up
(the devices this one uses are listed in the preferred order: a model several serve, asked for
without a device name, goes to the first; the picker lists their groups in that order too). The
network is listened to while the tab shows. Every
piece of work goes through the bridge's ``DevicesController`` (``app/bridge/devices.py``), on
workers; errors reach the user through ``show_error``. After a pairing or a removal, and once the
devices have been asked again, ``devices_changed`` tells the window, so the chat's picker reloads.
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..bridge import short_fingerprint
from ..bridge.devices import CLIENT, DeviceRow
from ..context import AppContext
from ..feedback import show_error
from .sharing import SharingBar


def describe_row(row: DeviceRow) -> str:
    """One line for a paired device: its name, which way the pairing goes, and whether it answers."""
    if row.role == CLIENT:
        return f"{row.name} — uses this computer's models"
    if row.reachable:
        count = len(row.models)
        return f"{row.name} — reachable at {row.address}, {count} model{'' if count == 1 else 's'} in the picker"
    return f"{row.name} — not reachable ({row.error or 'not asked yet'})"


class PairDialog(QDialog):
    """Asks for the code another device shows; ``code()`` is what was typed. Opened window-modal (``open``)."""

    def __init__(self, name: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(f"Pair with {name}")
        self.field = QLineEdit(placeholderText="123-456", maxLength=16)
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        buttons.button(QDialogButtonBox.Ok).setText("Pair")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"Type the pairing code {name} shows\n(on {name}: Server → Your devices → "
                             "Show pairing code, or `fireside devices code`)."))
        lay.addWidget(self.field)
        lay.addWidget(buttons)

    def code(self) -> str:
        return self.field.text().strip()


class DevicesPanel(QWidget):
    """Sharing, the devices on the network, and the paired devices.

    Signals:
        devices_changed(): a device was paired or removed and the devices have been asked again.
    """

    devices_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.devices = ctx.bridge.devices
        self.found: list = []
        self.pair_dialog: PairDialog | None = None
        self._then = ""  # the status line once the devices have been asked again
        self.sharing = SharingBar(ctx)
        self.devices.discovered.connect(self._on_devices_discovered)
        self.devices.failed.connect(self._on_devices_failed)
        self._build()
        self._shown = False

    def showEvent(self, event) -> None:
        """Listen for devices on the network while the tab shows (and read this device's identity and the
        paired devices the first time)."""
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            self.devices.read_identity(self.sharing.prefs().get("name"))
            self.refresh(fresh=False)
        self.devices.start_browsing()

    def hideEvent(self, event) -> None:
        super().hideEvent(event)
        self.devices.stop_browsing()

    def _build(self) -> None:
        self.network = QListWidget()
        self.network.currentRowChanged.connect(self._on_lists_changed)
        self.pair_button = QPushButton("Pair…", enabled=False)
        self.pair_button.clicked.connect(self._on_pair_clicked)
        self.paired = QListWidget()
        self.paired.currentRowChanged.connect(self._on_lists_changed)
        self.remove_button = QPushButton("Forget", enabled=False)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.up_button = QPushButton("Move up", enabled=False, toolTip="Prefer this device for a model several "
                                     "devices serve (asked for without a device name)")
        self.up_button.clicked.connect(self._on_up_clicked)
        self.check_button = QPushButton("Check again")
        self.check_button.clicked.connect(self._on_check_clicked)
        self.progress = QProgressBar(maximum=0, visible=False, maximumWidth=160)  # busy: no fraction to show
        self.status = QLabel()
        self._lay_out()
        self._show_found()

    def _lay_out(self) -> None:
        grid = QGridLayout()
        grid.addWidget(QLabel("<b>On the local network</b>"), 0, 0)
        grid.addWidget(QLabel("<b>Paired devices</b>"), 0, 1)
        grid.addWidget(self.network, 1, 0)
        grid.addWidget(self.paired, 1, 1)
        grid.addLayout(_row(self.pair_button), 2, 0)
        grid.addLayout(_row(self.remove_button, self.up_button, self.check_button), 2, 1)
        busy = QHBoxLayout()
        busy.addWidget(self.progress)
        busy.addWidget(self.status, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.sharing)
        lay.addLayout(grid, 1)
        lay.addLayout(busy)

    # --- devices on the network ------------------------------------------------------------------
    @Slot(list)
    def _on_devices_discovered(self, found: list) -> None:
        self.found = list(found)
        self._show_found()

    def _show_found(self) -> None:
        selected = self._selected(self.network)
        paired = {self.paired.item(i).data(Qt.UserRole + 1) for i in range(self.paired.count())}
        self.network.clear()
        for f in self.found:
            item = QListWidgetItem(f"{f.name} — {f.addresses[0] if f.addresses else '?'}:{f.port}"
                                   f"{' — paired' if f.fingerprint in paired else ''}")
            item.setData(Qt.UserRole, f.name)
            item.setToolTip(f"certificate fingerprint {short_fingerprint(f.fingerprint)} (as it announces it)")
            self.network.addItem(item)
            if f.name == selected:
                self.network.setCurrentItem(item)
        if not self.found:
            self.network.addItem(QListWidgetItem("No other device is sharing on this network (listening…)"))
        self._on_lists_changed()

    @Slot()
    def _on_pair_clicked(self) -> None:
        name = self._selected(self.network)
        found = next((f for f in self.found if f.name == name), None)
        if found is None:
            return
        self.pair_dialog = PairDialog(found.name, self)
        self.pair_dialog.accepted.connect(partial(self._on_pair_dialog_accepted, found))
        self.pair_dialog.open()

    def _on_pair_dialog_accepted(self, found) -> None:
        code = self.pair_dialog.code()
        if not code:
            show_error(f"Type the code {found.name} shows to pair with it")
            return
        self._busy(f"Pairing with {found.name}…")
        self.devices.pair(found, code, self.sharing.prefs().get("name"), partial(self._on_paired, found.name))

    def _on_paired(self, name: str, device, error) -> None:
        if error is not None:
            self._idle()
            show_error(error, f"pairing with {name}")
            return
        self._busy(f"Paired with {device.name}; asking it for its models…")
        self._then = f"Paired with {device.name}: its models are in the chat's picker as {device.name}/MODEL"
        self.refresh(fresh=True, changed=True)

    # --- paired devices --------------------------------------------------------------------------
    def refresh(self, fresh: bool = True, changed: bool = False) -> None:
        """Read the paired devices and ask those this one uses for their models, on a worker."""
        self.check_button.setEnabled(False)
        self.devices.list_devices(fresh, partial(self._on_devices_listed, changed))

    def _on_devices_listed(self, changed: bool, rows, error) -> None:
        self.check_button.setEnabled(True)
        self._idle()
        if self._then:
            self.status.setText(self._then)
            self._then = ""
        if error is not None:
            show_error(error, "reading the paired devices")
            rows = []
        selected = self._selected(self.paired)
        self.paired.clear()
        for row in rows:
            item = QListWidgetItem(describe_row(row))
            item.setData(Qt.UserRole, (row.name, row.role))
            item.setData(Qt.UserRole + 1, row.fingerprint)
            item.setToolTip(f"certificate fingerprint {short_fingerprint(row.fingerprint)} (pinned at pairing)")
            self.paired.addItem(item)
            if (row.name, row.role) == selected:
                self.paired.setCurrentItem(item)
        if not rows:
            self.paired.addItem(QListWidgetItem("No paired devices yet"))
        self._show_found()
        if changed:
            self.devices_changed.emit()

    @Slot()
    def _on_remove_clicked(self) -> None:
        selected = self._selected(self.paired)
        if not selected:
            return
        name, role = selected
        self._busy(f"{'Revoking' if role == CLIENT else 'Forgetting'} {name}…")
        self.devices.remove(name, role, partial(self._on_removed, name, role))

    def _on_removed(self, name: str, role: str, _device, error) -> None:
        if error is not None:
            show_error(error, f"removing {name}")
        else:
            self.status.setText(f"Revoked {name}: its requests are refused from now on" if role == CLIENT
                                else f"Forgot {name}; pair again to use its models")
        self.refresh(fresh=True, changed=error is None)

    def _server_names(self) -> list[str]:
        rows = [self.paired.item(i).data(Qt.UserRole) for i in range(self.paired.count())]
        return [r[0] for r in rows if r and r[1] != CLIENT]

    @Slot()
    def _on_up_clicked(self) -> None:
        selected, names = self._selected(self.paired), self._server_names()
        if not selected or selected[0] not in names or names.index(selected[0]) == 0:
            return
        i = names.index(selected[0])
        names[i - 1], names[i] = names[i], names[i - 1]
        self._busy(f"Preferring {selected[0]}…")
        self.devices.set_order(names, self._on_order_set)

    def _on_order_set(self, order, error) -> None:
        if error is not None:
            show_error(error, "changing the devices' order")
        else:
            self._then = "Preferred order: " + ", ".join(order) + " (for a model several devices serve)"
        self.refresh(fresh=False, changed=error is None)

    @Slot()
    def _on_check_clicked(self) -> None:
        self.refresh(fresh=True)

    # --- bits ------------------------------------------------------------------------------------
    @Slot(str, object)
    def _on_devices_failed(self, what: str, error) -> None:
        show_error(error, what)

    @Slot()
    def _on_lists_changed(self, *_args) -> None:
        selected = self._selected(self.paired)
        busy = not self.progress.isHidden()  # (the tab may be hidden)
        self.pair_button.setEnabled(not busy and bool(self._selected(self.network)))
        self.remove_button.setEnabled(not busy and bool(selected))
        names = self._server_names()
        self.up_button.setEnabled(not busy and bool(selected) and selected[1] != CLIENT and selected[0] in names[1:])
        self.remove_button.setText("Revoke" if selected and selected[1] == CLIENT else "Forget")
        self.remove_button.setToolTip("Shut this device out: its requests are refused from now on"
                                      if selected and selected[1] == CLIENT else
                                      "Forget this device: its models leave the picker")

    @staticmethod
    def _selected(view: QListWidget):
        item = view.currentItem()
        return item.data(Qt.UserRole) if item else None

    def _busy(self, text: str) -> None:
        self.progress.show()
        self.status.setText(text)
        self._on_lists_changed()

    def _idle(self) -> None:
        self.progress.hide()
        self._on_lists_changed()

    def dispose(self) -> None:
        self.sharing.dispose()


def _row(*widgets) -> QHBoxLayout:
    row = QHBoxLayout()
    for w in widgets:
        row.addWidget(w)
    row.addStretch(1)
    return row

