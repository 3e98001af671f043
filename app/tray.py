"""The tray icon: show the window, see the server's state, quit. Closing the window can leave a running
server here (the user's choice in Settings); Quit always goes through the app's shutdown sequence.
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon

from .theme import app_icon


class Tray:
    """Wraps ``QSystemTrayIcon``; ``create`` returns None where the platform has no tray."""

    def __init__(self, fireside):
        self.fireside = fireside
        window = fireside.window
        self.icon = QSystemTrayIcon(app_icon(), window)
        self.icon.setToolTip("Fireside")
        menu = QMenu(window)
        show = QAction("Show Fireside", menu)
        show.triggered.connect(self._show_window)
        quit_ = QAction("Quit", menu)
        quit_.triggered.connect(QApplication.quit)
        menu.addAction(show)
        menu.addSeparator()
        menu.addAction(quit_)
        self.menu = menu
        self.icon.setContextMenu(menu)
        self.icon.activated.connect(lambda reason: reason == QSystemTrayIcon.Trigger and self._show_window())
        self.icon.show()

    @classmethod
    def create(cls, fireside) -> Tray | None:
        if not QSystemTrayIcon.isSystemTrayAvailable():
            return None
        return cls(fireside)

    def keeps_running(self) -> bool:
        """Whether closing the window should leave the app running in the tray."""
        ctx = self.fireside.ctx
        server = self.fireside.window.pages["Server"]
        return bool(ctx and ctx.prefs.get("keep_server_in_tray") and getattr(server, "running", lambda: False)())

    def notify_hidden(self) -> None:
        self.fireside.window.hide()
        self.icon.showMessage("Fireside", "The server keeps running here. Quit from this icon's menu.")

    def _show_window(self) -> None:
        window = self.fireside.window
        window.showNormal()
        window.raise_()
        window.activateWindow()

    def hide(self) -> None:
        self.icon.hide()
