"""The Knowledge page: the knowledge collections a chat can answer from, each with where its files come from
(chosen files, or a folder it watches) and how many are indexed, and below them the selected collection's
files, each with its state and why it failed or was refused (``collection_files.py``); New from files, New
from a folder (watched: rescanned every 30 seconds while the app runs, and on Rescan), Rescan, Rename (typed
in the list) and Delete. A collection just made is selected, its files shown. A change of the documents'
embedder re-embeds every collection in the background, with its own progress bar here.

The collections are the API server's vector stores too (``bridge.knowledge``). Every call runs on the task
pool; while a collection is being indexed the page asks again once a second (progress is sampled, not
signalled per file), and stops asking once every collection is ready.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

from PySide6.QtCore import QSignalBlocker, Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..context import AppContext
from ..feedback import show_error
from .collection_files import CollectionFiles

POLL_MS = 1000
COLUMNS = ("Collection", "Files from", "Indexed", "State")


def describe_row(row) -> tuple[str, str, str, str]:
    """The four cells of a collection's row: name, source, ``indexed of total``, and its state in words."""
    c = row.collection
    counts = c.counts
    total = counts.get("total", 0) - counts.get("cancelled", 0)
    source = f"{row.folder} (watched)" if row.folder else "chosen files"
    indexed = f"{counts.get('completed', 0)} of {total}"
    if counts.get("in_progress"):
        state = f"indexing… {counts['in_progress']} to go"
    elif total == 0 and not row.refused:
        state = "empty"
    else:
        state = "ready"
    problems = counts.get("failed", 0) + row.refused
    if problems:
        state += f" · {problems} not indexed"
    return c.name or c.id, source, indexed, state


class KnowledgePage(QWidget):
    """The knowledge collections, listed with their progress, and the buttons that change them.

    Signals:
        collections_changed(): a collection was made or deleted (the chat's settings panel lists them again).
        listed(): the list was read and shown (tests wait on it).
        files_listed(): the selected collection's files were read and shown.
    """

    collections_changed = Signal()
    listed = Signal()
    files_listed = Signal()

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.rows: list = []
        self.note = ""  # what the last action did (a rescan's counts), shown above the selected row's problems
        self.tree = QTreeWidget(objectName="knowledgeList", rootIsDecorated=False, uniformRowHeights=True)
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setSelectionMode(QAbstractItemView.SingleSelection)
        self.tree.header().setSectionResizeMode(1, QHeaderView.Stretch)
        self.tree.currentItemChanged.connect(self._on_tree_current_changed)
        self.files = CollectionFiles()  # the selected collection's files
        self.progress = QProgressBar(visible=False, textVisible=True)
        self.embedding = QProgressBar(visible=False, textVisible=True, objectName="knowledgeEmbedding")
        self._indexing = self._embedding = False
        self.details = QLabel("", wordWrap=True, objectName="stats", textInteractionFlags=Qt.TextSelectableByMouse)
        self.from_files = QPushButton("New from files…")
        self.from_folder = QPushButton("New from folder (watched)…")
        self.rescan_button = QPushButton("Rescan", enabled=False, toolTip="Index the folder's new and changed "
                                         "files now and take out the deleted ones (also done every 30 seconds)")
        self.delete_button = QPushButton("Delete…", enabled=False)
        self.rename_button = QPushButton("Rename", enabled=False, toolTip="Type a new name in the list (F2)")
        self.rename_button.clicked.connect(self._on_rename_clicked)
        self.tree.itemChanged.connect(self._on_tree_item_changed)
        self._select: str | None = None  # a collection just made: selected once the list shows it
        self.from_files.clicked.connect(self._on_from_files_clicked)
        self.from_folder.clicked.connect(self._on_from_folder_clicked)
        self.rescan_button.clicked.connect(self._on_rescan_clicked)
        self.delete_button.clicked.connect(self._on_delete_clicked)
        self.poll = QTimer(self, interval=POLL_MS)
        self.poll.timeout.connect(self.refresh)
        self._build()
        self.ctx.bridge.knowledge.start_watching()
        self.refresh()

    def _build(self) -> None:
        buttons = QHBoxLayout()
        for button in (self.from_files, self.from_folder, self.rescan_button, self.rename_button, self.delete_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("<h2>Knowledge</h2>"))
        lay.addWidget(QLabel("Collections of documents a chat can answer from: tick one in a chat's settings "
                             "panel, and the passages that match each question go to the model as numbered "
                             "sources. A watched folder is rescanned every 30 seconds. The API server serves "
                             "the same collections as vector stores.", wordWrap=True))
        lay.addLayout(buttons)
        split = QSplitter(Qt.Vertical, childrenCollapsible=False)
        split.addWidget(self.tree)
        split.addWidget(self.files)
        split.setSizes([220, 480])
        lay.addWidget(split, 1)
        lay.addWidget(self.progress)
        lay.addWidget(self.embedding)
        lay.addWidget(self.details)

    # --- listing ---------------------------------------------------------------------------------
    @Slot()
    def refresh(self) -> None:
        self.ctx.bridge.knowledge.list(self._on_listed)
        self.ctx.bridge.embedder.progress(self._on_embedding_read)

    def _on_embedding_read(self, embedding, error) -> None:
        """A change of embedder re-embeds every collection in the background: shown here as it goes."""
        running = error is None and embedding is not None and not embedding.error and embedding.done < embedding.total
        self._embedding = running
        self.embedding.setVisible(running)
        if running:
            self.embedding.setRange(0, max(embedding.total, 1))
            self.embedding.setValue(embedding.done)
            self.embedding.setFormat(f"Embedding with {embedding.embedder}: %v of %m passages (searches use "
                                     "keywords until it is done)")
        self._poll_while_busy()

    def _poll_while_busy(self) -> None:
        if self._indexing or self._embedding:
            self.poll.start()
        else:
            self.poll.stop()

    def _on_listed(self, rows, error) -> None:
        if error:
            self.poll.stop()
            show_error(error, "listing the knowledge collections")
            return
        if self.tree.state() == QAbstractItemView.EditingState:
            return  # a name being typed: the next poll shows the list
        selected = self._select or self.selected()
        self.rows = rows
        with QSignalBlocker(self.tree):  # a rebuild is not a change of selection: told once, below
            self.tree.clear()
            for row in rows:
                item = QTreeWidgetItem(list(describe_row(row)))
                item.setData(0, Qt.UserRole, row.collection.id)
                item.setFlags(item.flags() | Qt.ItemIsEditable)  # Rename (or F2) types a new name here
                item.setToolTip(1, str(row.folder) if row.folder else "")
                self.tree.addTopLevelItem(item)
                if row.collection.id == selected:
                    self.tree.setCurrentItem(item)
                    self._select = None
        for column in (0, 2, 3):
            self.tree.resizeColumnToContents(column)
        self._show_progress(rows)
        self._on_tree_current_changed(self.tree.currentItem(), None)
        self.listed.emit()

    def _show_progress(self, rows) -> None:
        busy = [r for r in rows if r.collection.counts.get("in_progress")]
        total = sum(r.collection.counts.get("total", 0) - r.collection.counts.get("cancelled", 0) for r in busy)
        done = total - sum(r.collection.counts["in_progress"] for r in busy)
        self.progress.setVisible(bool(busy))
        if busy:
            self.progress.setRange(0, max(total, 1))
            self.progress.setValue(done)
            self.progress.setFormat(f"Indexing: %v of %m files ({', '.join(r.collection.name for r in busy)})")
        self._indexing = bool(busy)
        self._poll_while_busy()

    def selected(self) -> str | None:
        item = self.tree.currentItem()
        return item.data(0, Qt.UserRole) if item else None

    def _row(self, collection_id: str | None):
        return next((r for r in self.rows if r.collection.id == collection_id), None)

    @Slot(QTreeWidgetItem, QTreeWidgetItem)
    def _on_tree_current_changed(self, current, _previous) -> None:
        row = self._row(current.data(0, Qt.UserRole) if current else None)
        self.delete_button.setEnabled(row is not None)
        self.rename_button.setEnabled(row is not None)
        self.rescan_button.setEnabled(row is not None and row.folder is not None)
        self.files.follow(row.collection.id if row else None)
        if row is None:
            self.details.setText(self.note or ("" if self.rows else "No collections yet."))
            return
        lines = [self.note] if self.note else []
        if row.refused:
            lines.append("A refused file in the folder is tried again when it changes.")
        self.details.setText("\n".join(lines))
        self.ctx.bridge.knowledge.files(row.collection.id, partial(self._on_files_listed, row.collection.id))

    def _on_files_listed(self, collection_id: str, files, error) -> None:
        if error or collection_id != self.selected():  # deleted meanwhile, or another one chosen since
            return
        self.files.show_files(files)
        self.files_listed.emit()

    # --- changing ----------------------------------------------------------------------------------
    def create_from_files(self, paths: list[Path], name: str = "") -> None:
        self.ctx.bridge.knowledge.create_from_files(name, [Path(p) for p in paths], self._on_created)

    def watch_folder(self, folder: Path) -> None:
        self.note = f"Reading {folder}…"
        self.details.setText(self.note)
        self.ctx.bridge.knowledge.watch_folder(Path(folder), partial(self._on_created_one, str(folder)))

    def _on_created(self, result, error) -> None:
        if error:
            show_error(error, "making the collection")
            return
        collection, refused = result
        self._select = collection.id  # the new one is what the user looks at next: its files, Rescan, Delete
        if refused:
            show_error("Left out: " + "; ".join(f"{name}: {why}" for name, why in refused.items()),
                       "making the collection")
        self._changed()

    def _on_created_one(self, folder: str, collection, error) -> None:
        if error:
            show_error(error, f"watching {folder}")
        else:
            self._select = collection.id
        self.note = ""
        self._changed()

    def _changed(self) -> None:
        self.collections_changed.emit()
        self.refresh()

    def rescan(self, collection_id: str) -> None:
        self.rescan_button.setEnabled(False)
        self.ctx.bridge.knowledge.rescan(collection_id, self._on_rescanned)

    def _on_rescanned(self, scan, error) -> None:
        if error:
            show_error(error, "rescanning the folder")
        else:
            self.note = f"Rescanned: {scan.added} new, {scan.changed} changed, {scan.removed} removed."
        self.refresh()

    def rename(self, collection_id: str, name: str) -> None:
        """Give the collection a new name (chats and the API's vector stores show it)."""
        self.ctx.bridge.knowledge.rename(collection_id, name, self._on_renamed)

    def _on_renamed(self, _collection, error) -> None:
        if error:
            show_error(error, "renaming the collection")
        self._changed()

    @Slot()
    def _on_rename_clicked(self) -> None:
        item = self.tree.currentItem()
        if item is not None:
            self.tree.editItem(item, 0)

    @Slot(QTreeWidgetItem, int)
    def _on_tree_item_changed(self, item, column: int) -> None:
        row = self._row(item.data(0, Qt.UserRole))
        name = item.text(0).strip()
        if column != 0 or row is None or name == (row.collection.name or row.collection.id):
            return
        if not name:
            item.setText(0, row.collection.name or row.collection.id)  # an empty name is no name: kept
            return
        self.rename(row.collection.id, name)

    def delete(self, collection_id: str) -> None:
        self.note = ""
        self.ctx.bridge.knowledge.delete(collection_id, self._on_deleted)

    def _on_deleted(self, _result, error) -> None:
        if error:
            show_error(error, "deleting the collection")
        self._changed()

    @Slot()
    def _on_from_files_clicked(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "New collection from files", str(Path.home()),
                                                "Documents (*.pdf *.docx *.html *.htm *.md *.txt *.rst *.csv);;"
                                                "All files (*)")
        if paths:
            self.create_from_files([Path(p) for p in paths])

    @Slot()
    def _on_from_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "New collection from a folder (watched)", str(Path.home()))
        if folder:
            self.watch_folder(Path(folder))

    @Slot()
    def _on_rescan_clicked(self) -> None:
        if self.selected():
            self.rescan(self.selected())

    @Slot()
    def _on_delete_clicked(self) -> None:
        row = self._row(self.selected())
        if row is None:
            return
        box = QMessageBox(QMessageBox.Warning, "Delete collection", f"Delete the collection {row.collection.name!r}?",
                          QMessageBox.Yes | QMessageBox.Cancel, self)
        box.setInformativeText("Chats that use it stop finding its passages. A watched folder's own files are "
                               "not touched; only Fireside's copies and index go.")
        box.finished.connect(lambda result: result == QMessageBox.Yes and self.delete(row.collection.id))
        box.open()
