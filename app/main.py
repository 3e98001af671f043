"""Fireside's desktop app: one explicit start-up sequence, and a shutdown that reverses it.

Start-up, one log line per step: settings and folders, preferences, the chats database, the engine,
the task pool and engine bridge, the theme, the main window, the tray. Shutdown goes back down the
same list: hide the tray, close the window, stop the server, set every cancel event, stop the task
pool (joining its workers), close the engine (its runner processes go), close the database.

``Fireside`` holds the pieces so tests and tools can start exactly what ``main()`` starts, with their
own engine or settings.
"""

from __future__ import annotations

import logging
import signal
import sys

from PySide6.QtWidgets import QApplication

from fireside.engine.library import starter_path
from fireside.engine.settings import Settings

from . import systemlibs
from .bridge import EngineBridge
from .bridge.tasks import Tasks
from .context import AppContext
from .prefs import Prefs
from .store import Store
from .wheel import WheelGuard

log = logging.getLogger("fireside.app")


class Fireside:
    """The running app: its context, window and tray, started and stopped in order."""

    def __init__(self, settings: Settings | None = None, engine=None, *, tray: bool = True):
        """``engine``: an ``Engine`` (or a bare ``Runtime``, wrapped in one) that the caller keeps and
        closes; None starts the app's own, closed on ``stop``."""
        self.settings = settings or Settings.from_env()
        self._own_engine = engine is None
        self._engine = engine
        self._want_tray = tray
        self.ctx: AppContext | None = None
        self.wheel_guard = None
        self.window = None
        self.tray = None

    def start(self):
        from .bridge.prompt_cache import apply_prefs
        from .theme import APP_ICON, app_icon, apply_theme
        from .windows.mainwindow import MainWindow

        s = self.settings
        tasks = Tasks()
        starter = tasks.run_in_background(starter_path)  # package metadata, read once, off the GUI thread
        log.info("1/8 settings: data in %s, models in %s", s.data_dir, ", ".join(map(str, s.models_dirs)))
        s.ensure_dirs()
        prefs = Prefs(s.config_dir / "app.json", tasks)  # saved on the pool: no fsync on the GUI thread
        log.info("2/8 preferences from %s", prefs.path)
        s.models_dirs.extend(p for p in map(_path, prefs.get("models_dirs") or []) if p not in s.models_dirs)
        apply_prefs(s, prefs)  # the prompt cache's on/off and size cap, as the Settings page left them
        store = Store(s.chats_db)
        log.info("3/8 chats database %s (schema %d)", store.path, store.db.execute("PRAGMA user_version").fetchone()[0])
        engine = _make_engine(s, self._engine)
        log.info("4/8 engine ready")
        extras: dict = {}
        bridge = EngineBridge(engine, tasks, extras)
        from .bridge.loader import ModelLoader
        from .bridge.tools import AppTools

        tools = AppTools(s, engine)  # starts nothing: each MCP server starts when a chat first uses it
        log.info("5/8 task pool, engine bridge and MCP tools (%s)", s.config_dir / "mcp.json")
        self.ctx = AppContext(s, prefs, store, engine, tasks, bridge, extras, tools=tools,
                              loader=ModelLoader(bridge, prefs))
        bridge.former_ids(lambda renames, _error: prefs.rename_models(renames or {}))  # an older id's settings
        self.wheel_guard = WheelGuard.install(QApplication.instance())  # the wheel scrolls pages, not settings
        apply_theme(prefs.get("theme"))
        QApplication.setWindowIcon(app_icon())
        log.info("6/8 theme: %s, icon %s", prefs.get("theme"), APP_ICON.name)
        starter.result()  # the chat page asks for the starter model: the answer is cached by now
        self.window = MainWindow(self.ctx)
        log.info("7/8 main window")
        from fireside.engine.deps import check_floors

        from .feedback import show_error

        if store.read_only:
            show_error(store.read_only)  # in the notice bar: chats kept read-only
        tasks.run_in_background(check_floors, _show_problems)  # package metadata: off the GUI thread
        if self._want_tray:
            from .tray import Tray

            self.tray = Tray.create(self)
        log.info("8/8 tray: %s", "shown" if self.tray else "not available")
        return self.window

    def stop(self) -> None:
        """Reverse of ``start``; safe to call twice."""
        if self.ctx is None:
            return
        ctx, self.ctx = self.ctx, None
        if self.tray:
            self.tray.hide()
            log.info("shutdown: tray hidden")
        if self.window is not None:
            self.window.dispose()
            self.window.hide()
            self.window.deleteLater()
            log.info("shutdown: window closed")
        if self.wheel_guard is not None:
            QApplication.instance().removeEventFilter(self.wheel_guard)
            self.wheel_guard = None
        ctx.bridge.server.stop(wait=True)
        log.info("shutdown: server stopped")
        ctx.bridge.close()
        log.info("shutdown: cancel events set, downloads paused")
        if ctx.tools is not None:
            ctx.tools.close()
            log.info("shutdown: tool replies ended, MCP servers stopped")
        ctx.tasks.close(wait=True)
        ctx.prefs.flush()  # a save the pool had not started yet
        log.info("shutdown: task pool joined, preferences saved")
        if self._own_engine:
            ctx.engine.close()
            log.info("shutdown: engine closed")
        ctx.store.close()
        log.info("shutdown: chats database closed")


def _show_problems(problems, error) -> None:
    """A library too old to be safe, said in the notice bar (``check_floors`` ran on a worker)."""
    from .feedback import show_error

    for problem in problems or []:
        show_error(problem)
    if error is not None:
        show_error(error, "checking the installed libraries")


def _path(p):
    from pathlib import Path

    return Path(p).expanduser()


def _make_engine(settings: Settings, given):
    from fireside.engine.facade import Engine

    return Engine(settings) if given is None else Engine.of(given, settings)


def _check_binding() -> None:
    """PySide6 6.12.0 on CPython < 3.12 uses up a reference to True with each signal emitted and one to
    None with each Qt call that returns nothing; a long session then dies at exit ("bool_dealloc").
    pyproject.toml keeps it out; an environment that has it anyway is told why it will crash."""
    import PySide6

    if PySide6.__version__ == "6.12.0" and sys.version_info < (3, 12):
        log.warning("PySide6 6.12.0 on Python %d.%d loses references to True and None and crashes long "
                    "sessions at exit: install PySide6-Essentials 6.11 (pip install 'PySide6-Essentials!=6.12.0')",
                    *sys.version_info[:2])


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not QApplication.instance() and systemlibs.uses_xcb() and (lacking := systemlibs.missing()):
        print(systemlibs.advice(lacking), file=sys.stderr)  # instead of Qt's abort with no names
        return 1
    _check_binding()
    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv)
    app.setApplicationName("Fireside")
    app.setQuitOnLastWindowClosed(False)  # the tray may keep the server running; quit goes through us
    fireside = Fireside()
    window = fireside.start()
    window.close_requested.connect(lambda: _on_close(fireside, app))
    window.quit_requested.connect(app.quit)  # File → Quit, Ctrl+Q: through aboutToQuit's shutdown
    app.aboutToQuit.connect(fireside.stop)
    window.show()
    _quit_on_signals(app)
    code = app.exec()
    fireside.stop()
    return code


def _quit_on_signals(app: QApplication) -> None:
    """Ctrl+C or SIGTERM in a terminal quits through the same shutdown sequence as the Quit menu.

    The handler only queues the quit. Python runs a signal handler between any two bytecodes of the GUI
    thread, so quitting right there ran the whole shutdown inside whatever that code was doing: inside
    ``ThreadPoolExecutor.submit`` it waited forever for the lock ``submit`` held (tests/app/test_signals.py).
    """
    from PySide6.QtCore import QMetaObject, Qt, QTimer

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: QMetaObject.invokeMethod(app, "quit", Qt.QueuedConnection))
    timer = QTimer(app, interval=250)  # lets Python run its signal handlers while Qt's loop spins
    timer.timeout.connect(lambda: None)
    timer.start()


def _on_close(fireside: Fireside, app: QApplication) -> None:
    """Closing the window quits, unless the user chose to keep a running server in the tray."""
    if fireside.tray and fireside.tray.keeps_running():
        fireside.tray.notify_hidden()
        return
    app.quit()


if __name__ == "__main__":
    sys.exit(main())
