"""The conversation list beside the chat: new, search, rename (double-click or F2), delete and export.

``ConversationModel`` is a plain ``QAbstractListModel`` over the store's conversations (newest first),
filtered by the search box; renaming edits the title in place. The widget only asks for things
(``*_requested`` signals); the chat page decides, so deleting can offer an undo.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLineEdit,
    QListView,
    QMenu,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ..store import Conversation, Store

IdRole = Qt.UserRole + 1
Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()


class ConversationModel(QAbstractListModel):
    """Conversations, newest first, matching ``search``. Titles are editable."""

    def __init__(self, store: Store, parent=None):
        super().__init__(parent)
        self.store = store
        self.search = ""
        self.items: list[Conversation] = []
        self.refresh()

    def refresh(self, search: str | None = None) -> None:
        if search is not None:
            self.search = search
        self.beginResetModel()
        self.items = self.store.conversations(self.search)
        self.endResetModel()

    def rowCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.items)

    def data(self, index: Index, role: int = Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self.items):
            return None
        conv = self.items[index.row()]
        if role in (Qt.DisplayRole, Qt.EditRole):
            return conv.title
        if role == Qt.ToolTipRole:
            return f"{conv.title}\n{conv.model_id or 'no model chosen'}"
        if role == IdRole:
            return conv.id
        return None

    def flags(self, index: Index) -> Qt.ItemFlags:
        if not index.isValid():
            return Qt.NoItemFlags
        return Qt.ItemIsEnabled | Qt.ItemIsSelectable | Qt.ItemIsEditable

    def setData(self, index: Index, value, role: int = Qt.EditRole) -> bool:
        title = str(value or "").strip()
        if role != Qt.EditRole or not index.isValid() or not title:
            return False
        conv = self.items[index.row()]
        self.store.update_conversation(conv.id, title=title[:200])
        conv.title = title[:200]
        self.dataChanged.emit(index, index, [Qt.DisplayRole, Qt.EditRole])
        return True

    def row_of(self, conv_id: int) -> int:
        return next((i for i, c in enumerate(self.items) if c.id == conv_id), -1)


class ConversationList(QWidget):
    """Search box, New button and the list.

    Signals:
        new_requested(): the user wants a fresh chat.
        selected(int): a conversation was chosen.
        delete_requested(int): conversation id.
        export_requested(int, str): conversation id, ``markdown`` or ``json``.
    """

    new_requested = Signal()
    selected = Signal(int)
    delete_requested = Signal(int)
    export_requested = Signal(int, str)

    def __init__(self, store: Store, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("conversationList")
        self.model = ConversationModel(store, self)
        self.new_button = QPushButton("New chat", objectName="primary")
        self.new_button.clicked.connect(self.new_requested)
        self.search = QLineEdit(placeholderText="Search chats", clearButtonEnabled=True)
        self.search.textChanged.connect(self._on_search_changed)
        self.view = QListView()
        self.view.setModel(self.model)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.ElideRight)
        self.view.setUniformItemSizes(True)
        self.view.setEditTriggers(QAbstractItemView.DoubleClicked | QAbstractItemView.EditKeyPressed)
        self.view.setContextMenuPolicy(Qt.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._on_view_menu_requested)
        self.view.selectionModel().currentChanged.connect(self._on_current_changed)
        delete = QAction("Delete", self.view, shortcut=QKeySequence.Delete, shortcutContext=Qt.WidgetShortcut)
        delete.triggered.connect(self._on_delete_triggered)
        self.view.addAction(delete)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 8, 8, 8)
        top = QHBoxLayout()
        top.addWidget(self.new_button)
        lay.addLayout(top)
        lay.addWidget(self.search)
        lay.addWidget(self.view)
        self.setMinimumWidth(170)
        self.setMaximumWidth(260)

    def refresh(self, select: int | None = None) -> None:
        blocker = self.view.selectionModel().blockSignals(True)
        self.model.refresh()
        row = self.model.row_of(select) if select is not None else -1
        if row >= 0:
            self.view.setCurrentIndex(self.model.index(row))
        self.view.selectionModel().blockSignals(blocker)

    def current_id(self) -> int | None:
        index = self.view.currentIndex()
        return index.data(IdRole) if index.isValid() else None

    @Slot(str)
    def _on_search_changed(self, text: str) -> None:
        current = self.current_id()
        self.model.refresh(text)
        self.refresh(select=current)

    @Slot(QModelIndex, QModelIndex)
    def _on_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.selected.emit(current.data(IdRole))

    @Slot()
    def _on_delete_triggered(self) -> None:
        conv_id = self.current_id()
        if conv_id is not None:
            self.delete_requested.emit(conv_id)

    @Slot("QPoint")
    def _on_view_menu_requested(self, pos) -> None:
        index = self.view.indexAt(pos)
        if not index.isValid():
            return
        conv_id = index.data(IdRole)
        menu = QMenu(self)
        menu.addAction("Rename", lambda: self.view.edit(index))
        menu.addAction("Export as Markdown…", lambda: self.export_requested.emit(conv_id, "markdown"))
        menu.addAction("Export as JSON…", lambda: self.export_requested.emit(conv_id, "json"))
        menu.addSeparator()
        menu.addAction("Delete", lambda: self.delete_requested.emit(conv_id))
        menu.popup(self.view.viewport().mapToGlobal(pos))
