"""The Server page: start and stop the local API server (OpenAI, Ollama and Anthropic dialects over the
same runtime the chat uses), its port, loopback or network (network forces an API key), the key itself
(generated, copied, kept in the OS keyring), allowed origins, idle unload, model management through
the API (pull and delete: off unless switched on), a live request log, "Your devices" (sharing with
your other machines and pairing them: ``devices.DevicesPanel``) and ready-to-copy snippets that show
the real address.

The page holds widgets; the bridge's ``ServerController`` (``app/bridge/serving.py``) runs the server: the page
reads its widgets here, on the GUI thread, into a ``ServerConfig`` and hands it over, and the binding,
the joining and every keyring read or write happen on workers.
"""

from __future__ import annotations

import logging
import secrets

from PySide6.QtCore import QObject, QTimer, Signal, Slot
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ..bridge import DEFAULT_PORT
from ..bridge.serving import KeyState, ServerConfig
from ..context import AppContext
from ..feedback import show_error
from .devices import DevicesPanel
from .snippets import SNIPPETS, snippet

COPIED_MS = 1500


class RequestLog(QObject, logging.Handler):
    """Forwards uvicorn's access log lines (emitted on the server thread) to the GUI thread.

    Signals:
        line_logged(str): one request line.
    """

    line_logged = Signal(str)

    def __init__(self):
        QObject.__init__(self)
        logging.Handler.__init__(self, logging.INFO)

    def emit(self, record: logging.LogRecord) -> None:  # logging's emit, called on the server thread
        try:
            self.line_logged.emit(record.getMessage())
        except RuntimeError:  # the page is gone while uvicorn finishes its last line
            pass


class ServerPage(QWidget):
    """The API server.

    Signals:
        state_changed(): started, stopped or failed to start (the status bar shows the state).
    """

    state_changed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.server = ctx.bridge.server
        self.server.started.connect(self._on_server_started)
        self.server.stopped.connect(self._on_server_stopped)
        self.server.failed.connect(self._on_server_failed)
        self.server.key_read.connect(self._on_server_key_read)
        ctx.bridge.devices.sharing_started.connect(self._on_devices_sharing_started)
        ctx.bridge.devices.sharing_stopped.connect(self._on_devices_sharing_stopped)
        self.request_log = RequestLog()
        self.request_log.line_logged.connect(self._on_request_log_line_logged)
        logging.getLogger("uvicorn.access").addHandler(self.request_log)
        prefs = ctx.prefs.get("server") or {}
        lay = QVBoxLayout(self)
        lay.setContentsMargins(24, 16, 24, 16)
        lay.addLayout(self._header())
        lay.addWidget(self._options(prefs))
        self.tabs = QTabWidget()
        mono = QFontDatabase.systemFont(QFontDatabase.FixedFont)
        self.log = QPlainTextEdit(readOnly=True, maximumBlockCount=2000, placeholderText="Requests appear here")
        self.log.setFont(mono)
        self.tabs.addTab(self.log, "Request log")
        self.devices = DevicesPanel(ctx)
        self.tabs.addTab(self.devices, "Your devices")
        self.snippet_views = {}
        for name in SNIPPETS:
            view = QPlainTextEdit(readOnly=True)
            view.setFont(mono)
            self.snippet_views[name] = view
            self.tabs.addTab(view, name)
        lay.addWidget(self.tabs, 1)
        self.copy_button = QPushButton("Copy snippet")
        self.copy_button.clicked.connect(self._on_copy_snippet_clicked)
        self._copied = QTimer(self, singleShot=True, interval=COPIED_MS)
        self._copied.timeout.connect(self._on_tabs_current_changed)
        self.tabs.currentChanged.connect(self._on_tabs_current_changed)
        lay.addWidget(self.copy_button)
        self._on_tabs_current_changed()
        self._show_state()
        self.server.read_key()

    def _header(self) -> QHBoxLayout:
        self.state = QLabel(objectName="serverState")
        self.toggle = QPushButton("Start server", objectName="primary")
        self.toggle.clicked.connect(self._on_toggle_clicked)
        row = QHBoxLayout()
        row.addWidget(QLabel("<h2>Local API server</h2>"))
        row.addWidget(self.state, 1)
        row.addWidget(self.toggle)
        return row

    def _options(self, prefs: dict) -> QGroupBox:
        box = QGroupBox("Settings")
        box.setMaximumWidth(820)
        self.port = QSpinBox(minimum=1024, maximum=65535, value=prefs.get("port") or self.ctx.settings.port or DEFAULT_PORT)
        self.reach = QComboBox()
        self.reach.addItems(["This computer only (127.0.0.1)", "My network (0.0.0.0, API key required)"])
        self.reach.setCurrentIndex(1 if prefs.get("network") else 0)
        self.key = QLineEdit(echoMode=QLineEdit.Password, placeholderText="No key (loopback only)")
        generate = QPushButton("Generate")
        generate.clicked.connect(self._on_generate_clicked)
        copy = QPushButton("Copy")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.key.text()))
        self.require_key = QCheckBox("Require the key on this computer too")
        self.origins = QLineEdit(prefs.get("origins", ""), placeholderText="https://my-app.example, http://localhost:3000")
        self.idle = QSpinBox(minimum=0, maximum=24 * 60, suffix=" min", specialValueText="never",
                             value=int(prefs.get("idle_min", 10)))
        self.jit = QCheckBox("Load a model when a request names it (just in time)",
                             checked=bool(prefs.get("jit", True)))
        self.jit.setToolTip("Off: only models you loaded here answer; requests for others get a 404")
        self.management = QCheckBox("Allow model management: API clients may download and delete models",
                                    checked=bool(prefs.get("management", False)))
        self.management.setToolTip("Ollama's /api/pull and /api/delete (and the API key, when one is set); "
                                   "off: they answer 403. As `fireside serve --allow-management`.")
        key_row = QHBoxLayout()
        key_row.addWidget(self.key, 1)
        key_row.addWidget(generate)
        key_row.addWidget(copy)
        form = QFormLayout(box)
        form.addRow("Port", self.port)
        form.addRow("Reachable from", self.reach)
        form.addRow("API key", key_row)
        form.addRow("", self.require_key)
        form.addRow("Allowed origins", self.origins)
        form.addRow("Unload idle models after", self.idle)
        form.addRow("", self.jit)
        form.addRow("", self.management)
        for signal in (self.port.valueChanged, self.reach.currentIndexChanged, self.key.textChanged):
            signal.connect(self._on_options_changed)
        return box

    # --- state -----------------------------------------------------------------------------------
    def running(self) -> bool:
        return self.server.running

    def url(self) -> str:
        if self.server.url is not None:
            return self.server.url.replace("0.0.0.0", "localhost")
        return f"http://127.0.0.1:{self.port.value()}"

    def network_url(self) -> str | None:
        """Where other machines reach the running server (its network address), when it listens on them."""
        if not self.running() or not self.server.url or "0.0.0.0" not in self.server.url:
            return None
        return self.server.reachable_urls[0] if self.server.reachable_urls else None

    def sharing_url(self) -> str | None:
        """Where paired devices reach this computer while it shares (its network address), else None."""
        device = self.ctx.bridge.devices.device
        return device.url if device is not None else None

    def status_text(self) -> str:
        """The status bar's words: the API server, and sharing (which listens on the network by itself)."""
        text = f"Server running at {self.network_url() or self.url()}" if self.running() else "Server stopped"
        shared = self.sharing_url()
        return f"{text} · sharing with paired devices on {shared}" if shared else text

    def _state_text(self) -> str:
        if self.running():
            text = f"<b>Running</b> at {self.url()}"
            if network := self.network_url():
                text += f" · on your network at <b>{network}</b>"
        else:
            text = "API server stopped"
        if shared := self.sharing_url():
            text += f" · <b>Sharing</b> with paired devices on <b>{shared}</b> (Your devices tab)"
        return text

    @Slot(object)
    def _on_devices_sharing_started(self, _device) -> None:
        self._show_state()

    @Slot()
    def _on_devices_sharing_stopped(self) -> None:
        self._show_state()

    def _show_state(self) -> None:
        running = self.running()
        self.state.setText(self._state_text())
        self.toggle.setText("Stop server" if running else "Start server")
        self.toggle.setObjectName("danger" if running else "primary")
        self.toggle.style().unpolish(self.toggle)
        self.toggle.style().polish(self.toggle)
        for w in (self.port, self.reach, self.key, self.origins, self.require_key, self.jit, self.management):
            w.setEnabled(not running)
        key = self.key.text() if (self.require_key.isChecked() or self.reach.currentIndex()) else ""
        for name, view in self.snippet_views.items():
            view.setPlainText(snippet(name, self.url(), key))
        self.state_changed.emit()

    # --- start and stop --------------------------------------------------------------------------
    @Slot()
    def _on_toggle_clicked(self) -> None:
        if self.running():
            self.stop_server()
        else:
            self.start_server()

    def start_server(self) -> None:
        """Read the widgets (here, on the GUI thread) and hand the server controller what they say."""
        network = self.reach.currentIndex() == 1
        key = self.key.text().strip() or None
        if network and not key:
            key = secrets.token_urlsafe(24)
            self.key.setText(key)
        self._save_prefs()
        self.toggle.setEnabled(False)
        self.server.start(ServerConfig(
            host="0.0.0.0" if network else "127.0.0.1", port=self.port.value(),
            api_key=key if (network or self.require_key.isChecked()) else None, saved_key=self.key.text(),
            origins=[o.strip() for o in self.origins.text().split(",") if o.strip()], jit=self.jit.isChecked(),
            idle_ttl_s=self.idle.value() * 60.0, management=self.management.isChecked()))

    @Slot(str)
    def _on_server_started(self, url: str) -> None:
        self.toggle.setEnabled(True)
        self.log.appendPlainText(f"listening on {url}")
        self._show_state()

    def stop_server(self, wait: bool = False) -> None:
        if self.server.thread is None:
            return
        self.toggle.setEnabled(False)
        self.server.stop(wait=wait)
        self._show_state()

    @Slot()
    def _on_server_stopped(self) -> None:
        self.toggle.setEnabled(True)
        self._show_state()

    @Slot(str, object)
    def _on_server_failed(self, what: str, error) -> None:
        show_error(error, what)

    @Slot(object)
    def _on_server_key_read(self, state: KeyState) -> None:
        if state.key and not self.key.text():
            self.key.setText(state.key)
            self.require_key.setChecked(True)

    def dispose(self) -> None:
        logging.getLogger("uvicorn.access").removeHandler(self.request_log)
        self.devices.dispose()

    # --- options ---------------------------------------------------------------------------------
    @Slot()
    def _on_generate_clicked(self) -> None:
        self.key.setText(secrets.token_urlsafe(24))

    @Slot()
    def _on_options_changed(self, *_args) -> None:
        if self.key.text():
            self.require_key.setChecked(True)
        self._show_state()

    def _save_prefs(self) -> None:
        self.ctx.prefs.set("server", {"port": self.port.value(), "network": self.reach.currentIndex() == 1,
                                      "origins": self.origins.text(), "idle_min": self.idle.value(),
                                      "jit": self.jit.isChecked(), "management": self.management.isChecked()})

    @Slot(str)
    def _on_request_log_line_logged(self, line: str) -> None:
        self.log.appendPlainText(line)

    @Slot()
    def _on_tabs_current_changed(self, *_args) -> None:
        """The copy button copies what the tab shows: a snippet, or the request log; Your devices has none."""
        view = self.tabs.currentWidget()
        self.copy_button.setVisible(isinstance(view, QPlainTextEdit))
        self.copy_button.setText("Copy log" if view is self.log else
                                 f"Copy the {self.tabs.tabText(self.tabs.currentIndex())} snippet")

    @Slot()
    def _on_copy_snippet_clicked(self) -> None:
        view = self.tabs.currentWidget()
        if isinstance(view, QPlainTextEdit):
            QGuiApplication.clipboard().setText(view.toPlainText())
            self.copy_button.setText("Copied ✓" if view.toPlainText() else "Nothing to copy yet")
            self._copied.start()  # the label comes back after a moment

