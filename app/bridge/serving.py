"""The API server as the app runs it: start and stop, the idle unload time, and the saved API key.

``ServerController`` is the Server page's road to the engine (part of the bridge: ``ctx.bridge.server``).
The page reads its widgets on the GUI thread into a ``ServerConfig`` and hands that over; binding the
port, stopping uvicorn and every keyring read or write run on the task pool, and the outcome comes
back as a signal on the GUI thread. A taken port is a clear error, never a hang (``ServerThread``
waits for uvicorn to start or its thread to die).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, Signal

from fireside.engine.secrets import keyring_available

from .tasks import Tasks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerConfig:
    """What the Server page's widgets said when Start was pressed (read on the GUI thread)."""

    host: str
    port: int
    api_key: str | None  # the key the server requires (None: loopback clients need none)
    saved_key: str  # the key to keep in the keyring ("" forgets the saved one)
    origins: list[str] = field(default_factory=list)
    jit: bool = True
    idle_ttl_s: float = 600.0
    management: bool = False  # pull and delete through the API (``fireside serve --allow-management``)


@dataclass(frozen=True)
class KeyState:
    """The saved API key, and whether an OS keyring exists to keep one."""

    key: str | None
    keyring: bool


class ServerController(QObject):
    """Runs the app's API server over the engine. Lives on the GUI thread.

    Signals:
        started(str): the server is listening at this URL.
        stopped(): the server has stopped (its thread is joined).
        failed(str, object): what failed ("starting the server", "stopping the server", "keeping the
            API key"), and the exception.
        key_read(object): a ``KeyState`` (the saved key, read once when the page is built).
    """

    started = Signal(str)
    stopped = Signal()
    failed = Signal(str, object)
    key_read = Signal(object)

    def __init__(self, engine, settings, tasks: Tasks, parent: QObject | None = None):
        super().__init__(parent)
        self.engine, self.settings, self.tasks = engine, settings, tasks
        self.thread = None
        self.reachable_urls: tuple[str, ...] = ()  # where other machines reach it (its network addresses)
        self.collections = None  # () -> the app's knowledge Collections (bridge.embedder's), on a worker

    @property
    def running(self) -> bool:
        return bool(self.thread and self.thread.running)

    @property
    def url(self) -> str | None:
        return self.thread.url if self.thread is not None else None

    # --- the key ---------------------------------------------------------------------------------
    def read_key(self) -> None:
        """Read the saved key and whether a keyring exists, on a worker; ``key_read`` brings them."""
        from fireside.engine.apikey import load_api_key  # not the server package: no FastAPI import yet

        def read() -> KeyState:
            available = keyring_available()
            return KeyState(load_api_key() if available else None, available)

        self.tasks.run_in_background(read, self._on_key_done)

    def _on_key_done(self, state, error) -> None:
        if error is not None:
            self.failed.emit("reading the API key", error)
            state = KeyState(None, False)
        self.key_read.emit(state)

    # --- start and stop --------------------------------------------------------------------------
    def start(self, config: ServerConfig) -> None:
        """Keep the key, set the idle time and bind the port, all on a worker."""
        self.engine.idle_ttl_s = config.idle_ttl_s  # a float read by the reaper: no lock needed
        self.tasks.run_in_background(lambda: self._start(config), self._on_started)

    def _start(self, config: ServerConfig):
        from fireside.engine.server import SecurityPolicy, ServerThread, create_app

        problem = self._keep_key(config.saved_key)
        policy = SecurityPolicy(api_key=config.api_key, bind_host=config.host, port=config.port,
                                allowed_origins=config.origins, allow_management=config.management)
        collections = self.collections() if self.collections else None
        app = create_app(self.engine, self.settings, policy=policy, jit=config.jit, collections=collections)
        thread = ServerThread(app, config.host, config.port, access_log=True, log_level="info")
        thread.start()
        return thread, problem, tuple(thread.reachable_urls)  # the interfaces read here, not on the GUI thread

    @staticmethod
    def _keep_key(key: str) -> Exception | None:
        """Save (or forget) the key; a keyring that cannot keep it is reported, and the key still
        guards this session."""
        from fireside.engine.apikey import delete_api_key, save_api_key
        from fireside.engine.errors import ServerError

        if not keyring_available():
            return ServerError("No OS keyring on this machine: the API key works until Fireside quits, and a "
                               "new one is needed after a restart") if key else None
        try:
            save_api_key(key) if key else delete_api_key()
        except ServerError as exc:
            return exc
        return None

    def _on_started(self, result, error) -> None:
        if error is not None:
            self.failed.emit("starting the server", error)
            self.stopped.emit()
            return
        self.thread, problem, self.reachable_urls = result
        if problem is not None:
            self.failed.emit("keeping the API key in the keyring (it works for this session only)", problem)
        self.started.emit(self.thread.url)

    def stop(self, wait: bool = False) -> None:
        """Stop serving: on a worker, or here and now with ``wait`` (at shutdown)."""
        thread, self.thread = self.thread, None
        if thread is None:
            return
        if wait:
            thread.stop()
            self.stopped.emit()
        else:
            self.tasks.run_in_background(thread.stop, self._on_stopped)

    def _on_stopped(self, _result, error) -> None:
        if error is not None:
            self.failed.emit("stopping the server", error)
        self.stopped.emit()
