"""The "Remote engines" group of the Settings page: the OpenAI-compatible servers a user has added, each
with whether it answers and how many models it lists (or why not), and fields to add or remove one.

Every registry and network call (adding, removing, asking each remote for its models) goes through the
bridge, on a worker; keys go to the OS keyring through the engine, and where no keyring exists a remote
with a key is refused with a sentence saying so (the bridge asks the keyring, off the GUI thread). After a change, and once the
remotes have been asked again, ``remotes_changed`` tells the window so the chat's model picker reloads.
"""

from __future__ import annotations

from functools import partial

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..feedback import show_error


def describe_status(status) -> str:
    """One line for a ``RemoteStatus``: where it is, and how many models it lists or what went wrong."""
    where = status.endpoint.base_url + (" · key in keyring" if status.endpoint.has_key else "")
    if status.error:
        return f"{status.endpoint.name} — {where} — unreachable: {status.error}"
    count = len(status.models)
    return f"{status.endpoint.name} — {where} — reachable, {count} model{'' if count == 1 else 's'}"


class RemotesBox(QGroupBox):
    """The remote engines, listed with their state, plus add and remove.

    Signals:
        remotes_changed(): a remote was added or removed and every remote has been asked again
            (the engine's model lists are fresh, so a picker that reloads now sees the change).
    """

    remotes_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__("Remote engines", parent)
        self.ctx = ctx
        self.remotes = QListWidget(maximumHeight=80)
        self.remotes.currentRowChanged.connect(self._on_remotes_row_changed)
        self.name = QLineEdit(placeholderText="lab")
        self.url = QLineEdit(placeholderText="http://192.168.1.20:8080/v1")
        self.key = QLineEdit(echoMode=QLineEdit.Password, placeholderText="optional; kept in the OS keyring")
        self.add_button = QPushButton("Add remote")
        self.add_button.clicked.connect(self._on_add_clicked)
        self.remove_button = QPushButton("Remove remote", enabled=False)
        self.remove_button.clicked.connect(self._on_remove_clicked)
        self.check_button = QPushButton("Check again")
        self.check_button.clicked.connect(self._on_check_clicked)
        self._build()
        self.refresh(fresh=False)

    def _build(self) -> None:
        fields = QHBoxLayout()  # one row, so the group stays short on a 800-pixel-high screen
        for label, field, stretch in (("Name", self.name, 1), ("Base URL", self.url, 3), ("API key", self.key, 2)):
            fields.addWidget(QLabel(label))
            fields.addWidget(field, stretch)
        buttons = QHBoxLayout()
        for button in (self.add_button, self.remove_button, self.check_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("OpenAI-compatible servers (another Fireside, llama.cpp, vLLM, …). Their models "
                             "appear in the chat's model picker as remote/NAME/MODEL.", wordWrap=True))
        lay.addWidget(self.remotes)
        lay.addLayout(fields)
        lay.addLayout(buttons)

    # --- asking the remotes ----------------------------------------------------------------------
    def refresh(self, fresh: bool = True, changed: bool = False) -> None:
        """Ask every remote for its models on a worker (``fresh`` skips the engine's short cache)."""
        self._set_busy(True)
        self.ctx.bridge.remote_statuses(fresh, partial(self._on_statuses_listed, changed))

    def _on_statuses_listed(self, changed: bool, statuses, error) -> None:
        self._set_busy(False)
        if error:
            show_error(error, "checking the remote engines")
            statuses = []
        selected = self.selected()
        self.remotes.clear()
        for status in statuses:
            item = QListWidgetItem(describe_status(status))
            item.setData(Qt.UserRole, status.endpoint.name)
            item.setToolTip(item.text())
            self.remotes.addItem(item)
            if status.endpoint.name == selected:
                self.remotes.setCurrentItem(item)
        if not statuses:
            self.remotes.addItem(QListWidgetItem("No remote engines yet."))
        self._on_remotes_row_changed(self.remotes.currentRow())
        if changed:
            self.remotes_changed.emit()

    def selected(self) -> str | None:
        item = self.remotes.currentItem()
        return item.data(Qt.UserRole) if item else None

    def _set_busy(self, busy: bool) -> None:
        for button in (self.add_button, self.check_button):
            button.setEnabled(not busy)
        self.remove_button.setEnabled(not busy and bool(self.selected()))

    # --- behaviour -------------------------------------------------------------------------------
    @Slot(int)
    def _on_remotes_row_changed(self, _row: int) -> None:
        self.remove_button.setEnabled(self.add_button.isEnabled() and bool(self.selected()))

    @Slot()
    def _on_check_clicked(self) -> None:
        self.refresh(fresh=True)

    @Slot()
    def _on_add_clicked(self) -> None:
        name, url, key = self.name.text().strip(), self.url.text().strip(), self.key.text()
        if not name or not url:
            show_error("A remote engine needs a name and a base URL")
            return
        self._set_busy(True)
        self.ctx.bridge.add_remote(name, url, key or None, partial(self._on_remote_added, name))

    def _on_remote_added(self, name: str, _endpoint, error) -> None:
        if error:
            self._set_busy(False)
            show_error(error, f"adding remote engine {name!r}")
            return
        for field in (self.name, self.url, self.key):
            field.clear()
        self.refresh(fresh=True, changed=True)

    @Slot()
    def _on_remove_clicked(self) -> None:
        name = self.selected()
        if not name:
            return
        self._set_busy(True)
        self.ctx.bridge.remove_remote(name, partial(self._on_remote_removed, name))

    def _on_remote_removed(self, name: str, _endpoint, error) -> None:
        if error:
            show_error(error, f"removing remote engine {name!r}")
        self.refresh(fresh=True, changed=not error)
