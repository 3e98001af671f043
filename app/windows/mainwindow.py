"""The main window: a side bar of pages (Chat, Discover, My Models, Knowledge, Server, Settings), a notice bar for
errors and undo offers, and a status bar with the loaded models and their memory, and the server's
state and address.

Pages are built from the one ``AppContext``. The status bar refreshes when the bridge says the set of
loaded models changed, and every few seconds for memory (the engine's list is a quick, locked read).
What other processes change (a remote added from the CLI, a model pulled or imported, the models
folders) reaches the model picker, My Models and Settings through the ``ConfigWatcher``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPointF, QSize, Qt, QTimer, Signal, Slot
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import (
    QFrame,
    QGraphicsDropShadowEffect,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QPushButton,
    QStackedWidget,
    QWidget,
)

from fireside.engine.fmt import human_bytes

from .. import feedback
from ..chat.page import ChatPage
from ..context import AppContext
from ..watch import ConfigWatcher
from .discover import DiscoverPage
from .knowledge import KnowledgePage
from .models import ModelsPage
from .server import ServerPage
from .settings import SettingsPage

PAGES = ("Chat", "Discover", "My Models", "Knowledge", "Server", "Settings")
RESUME_SHARING_MS = 1500  # after the first window is up: starting the TLS listener then costs it nothing


class NoticeBar(QFrame):
    """The last error, or an offer to undo, floating over the top of the pages: it takes no room in their
    layout, so nothing on a page moves when it appears or goes (a banner in the layout pushed every page
    down about 34 px, moving buttons under the pointer). ``anchor`` is the widget it floats over.

    Signals:
        action_clicked(): the user pressed the notice's action (Undo).
    """

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("noticeBar")
        self.text = QLabel(wordWrap=True)
        self.action = QPushButton(visible=False)
        self.close_button = QPushButton("Dismiss")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(12, 6, 12, 6)
        lay.addWidget(self.text, 1)
        lay.addWidget(self.action)
        lay.addWidget(self.close_button)
        self.action.clicked.connect(self._on_action_clicked)
        self.close_button.clicked.connect(self.hide)
        self._callback: Callable[[], None] | None = None
        self.anchor: QWidget | None = None
        self.setAttribute(Qt.WA_StyledBackground, True)
        self.setGraphicsEffect(QGraphicsDropShadowEffect(blurRadius=16, offset=QPointF(0, 2), color=QColor(0, 0, 0, 90)))
        self.hide()

    def place(self) -> None:
        """Float centred over the top of ``anchor``, as wide as the text needs (at most 760 px)."""
        if self.anchor is None:
            return
        area = self.anchor.geometry()
        width = min(760, max(320, area.width() - 48))
        height = max(self.sizeHint().height(), self.heightForWidth(width) if self.hasHeightForWidth() else 0)
        self.setGeometry(area.x() + (area.width() - width) // 2, area.y() + 8, width, height)
        self.raise_()

    def show_message(self, text: str, kind: str = "error", action: str = "",
                     callback: Callable[[], None] | None = None) -> None:
        self.setProperty("kind", kind)
        self.style().unpolish(self)
        self.style().polish(self)
        self.text.setText(text)
        self.action.setText(action)
        self.action.setVisible(bool(action))
        self._callback = callback
        self.show()
        self.place()

    @Slot()
    def _on_action_clicked(self) -> None:
        callback, self._callback = self._callback, None
        self.hide()
        if callback:
            callback()
        self.action_clicked.emit()


class MainWindow(QMainWindow):
    """Fireside's window.

    Signals:
        close_requested(): the user closed the window (main decides: quit, or stay in the tray).
        quit_requested(): the user chose Quit (the File menu, or Ctrl+Q): main quits, server or not.
    """

    close_requested = Signal()
    quit_requested = Signal()

    def __init__(self, ctx: AppContext):
        super().__init__()
        self.ctx = ctx
        self.setWindowTitle("Fireside")
        self.resize(1280, 800)
        self.notice = NoticeBar()
        self._sink = lambda text: self.notice.show_message(text)
        feedback.add_sink(self._sink)
        self.pages = {
            "Chat": ChatPage(ctx), "Discover": DiscoverPage(ctx), "My Models": ModelsPage(ctx),
            "Knowledge": KnowledgePage(ctx), "Server": ServerPage(ctx), "Settings": SettingsPage(ctx),
        }
        self._build()
        self.chat.undo_offered.connect(self._on_chat_undo_offered)
        self.pages["Discover"].downloads.model_added.connect(self._on_downloads_model_added)
        ctx.bridge.loaded_changed.connect(self._on_bridge_loaded_changed)
        ctx.bridge.unload_failed.connect(self._on_bridge_unload_failed)
        self.pages["Settings"].remotes.remotes_changed.connect(self._on_settings_remotes_changed)
        self.pages["Knowledge"].collections_changed.connect(self.chat.list_collections)
        self.pages["Settings"].documents.chosen.connect(self._on_documents_embedder_chosen)
        self.pages["Server"].state_changed.connect(self._on_bridge_loaded_changed)
        self.pages["Server"].devices.devices_changed.connect(self._on_settings_remotes_changed)
        self._timer = QTimer(self, interval=3000)
        self._timer.timeout.connect(self._on_bridge_loaded_changed)
        self._timer.start()
        self._on_bridge_loaded_changed()
        self.watcher = ConfigWatcher(ctx, self)
        self.watcher.remotes_changed.connect(self._on_watcher_remotes_changed)
        self.watcher.library_changed.connect(self._on_watcher_library_changed)
        self.watcher.folders_changed.connect(self._on_watcher_folders_changed)
        self.watcher.start()
        self._resumed = False
        self._resuming = False  # sharing left on at the last quit is starting again: say so once it listens
        ctx.bridge.devices.sharing_started.connect(self._on_devices_sharing_started)
        ctx.bridge.devices.sharing_stopped.connect(self._on_devices_sharing_stopped)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        if not self._resumed:
            self._resumed = True
            QTimer.singleShot(RESUME_SHARING_MS, self._on_resume_sharing_timeout)

    @Slot()
    def _on_resume_sharing_timeout(self) -> None:
        """Sharing was on when the app last quit: share again, and say so once it listens."""
        self._resuming = self.pages["Server"].devices.sharing.resume_sharing()

    @Slot()
    def _on_devices_sharing_stopped(self) -> None:
        self._resuming = False  # it failed to start (the failure is shown), or was stopped: nothing to say

    @Slot(object)
    def _on_devices_sharing_started(self, device) -> None:
        if not self._resuming:
            return
        self._resuming = False
        self.notice.show_message(f"Sharing this computer's models with your paired devices on {device.url}, as "
                                 "when Fireside last quit.", "info", "Stop sharing", self._stop_sharing)

    def _stop_sharing(self) -> None:
        self.pages["Server"].devices.sharing.share.setChecked(False)

    @property
    def chat(self) -> ChatPage:
        return self.pages["Chat"]

    def _build(self) -> None:
        self.sidebar = QListWidget(objectName="sidebar")
        self.sidebar.setFixedWidth(150)
        self.sidebar.setIconSize(QSize(18, 18))
        self.stack = QStackedWidget()
        for name in PAGES:
            self.sidebar.addItem(QListWidgetItem(name))
            self.stack.addWidget(self.pages[name])
        self.sidebar.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.sidebar.setCurrentRow(0)
        central = QWidget()
        lay = QHBoxLayout(central)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(0)
        lay.addWidget(self.sidebar)
        lay.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        self.notice.setParent(central)  # floating over the pages, outside their layout
        self.notice.anchor = self.stack
        self.models_label = QLabel()
        self.server_label = QLabel()
        self.statusBar().addWidget(self.models_label, 1)
        self.statusBar().addPermanentWidget(self.server_label)
        self._menus()

    def _menus(self) -> None:
        """File → Quit (Ctrl+Q, the platform's Quit keys): the app's own way out, tray or not."""
        file_menu = self.menuBar().addMenu("&File")
        self.quit_action = QAction("&Quit Fireside", self, shortcutContext=Qt.ApplicationShortcut,
                                   menuRole=QAction.QuitRole)
        keys = [QKeySequence("Ctrl+Q")]  # the platform's Quit keys too; some platforms name none (Windows)
        keys += [k for k in QKeySequence.keyBindings(QKeySequence.Quit) if k not in keys]
        self.quit_action.setShortcuts(keys)
        self.quit_action.setToolTip("Stop the server and sharing, unload the models and quit")
        self.quit_action.triggered.connect(self._on_quit_triggered)
        file_menu.addAction(self.quit_action)

    @Slot()
    def _on_quit_triggered(self) -> None:
        self.quit_requested.emit()

    def show_page(self, name: str) -> None:
        self.sidebar.setCurrentRow(PAGES.index(name))

    @Slot()
    def _on_bridge_loaded_changed(self) -> None:
        loaded = self.ctx.engine.loaded()
        if loaded:
            parts = [f"{m.model_id} · {human_bytes(m.rss_bytes or m.planned_ram_bytes)} RAM"
                     + (f" · {human_bytes(m.planned_gpu_bytes)} VRAM" if m.planned_gpu_bytes else "")
                     + (f" · {m.threads_share_label()}" if m.threads_share_label() else "") for m in loaded]
            self.models_label.setText("Loaded: " + "  |  ".join(parts))
        else:
            self.models_label.setText("No model loaded")
        self.server_label.setText(self.pages["Server"].status_text())

    @Slot(str, object)
    def _on_bridge_unload_failed(self, model_id: str, error) -> None:
        feedback.show_error(error, f"unloading {model_id}")

    @Slot(object)
    def _on_downloads_model_added(self, _job) -> None:
        self.pages["My Models"].refresh()
        self.chat.model_bar.reload_list()

    @Slot()
    def _on_settings_remotes_changed(self) -> None:
        self.chat.model_bar.reload_list()

    @Slot()
    def _on_watcher_remotes_changed(self) -> None:
        self.chat.model_bar.reload_list()
        self.pages["Settings"].remotes.refresh(fresh=False)
        self.pages["Server"].devices.refresh(fresh=False)

    @Slot()
    def _on_watcher_library_changed(self) -> None:
        self.pages["My Models"].refresh()
        self.chat.model_bar.reload_list()

    @Slot(list)
    def _on_watcher_folders_changed(self, folders: list) -> None:
        dirs = self.ctx.settings.models_dirs
        dirs[1:] = [Path(f) for f in folders]
        self.ctx.prefs.data["models_dirs"] = list(folders)  # what another window saved; ours is stale
        self.pages["Settings"].show_folders()
        self._on_watcher_library_changed()

    @Slot(object)
    def _on_documents_embedder_chosen(self, _model_id) -> None:
        self.pages["Knowledge"].refresh()  # its re-embedding shows there as it goes

    @Slot(str, object)
    def _on_chat_undo_offered(self, text: str, undo) -> None:
        self.notice.show_message(text, "info", "Undo", undo)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        if self.notice.isVisible():
            QTimer.singleShot(0, self.notice.place)  # once the layout has given the pages their new size

    def closeEvent(self, event) -> None:
        self.close_requested.emit()
        event.accept()

    def dispose(self) -> None:
        """Detach from app-wide hooks; main calls this before tearing the engine down."""
        feedback.remove_sink(self._sink)
        self._timer.stop()
        self.watcher.stop()
        for page in self.pages.values():
            if hasattr(page, "dispose"):
                page.dispose()
