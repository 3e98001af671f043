"""The Discover page: search the Hugging Face hub for GGUF models, open a repo to see its files by
quantization and size with a fit pill read from each file's real header, and download one; the
downloads panel below tracks every pull.

Every hub call blocks on the network, so each goes through the bridge's ``DownloadsController``
(``app/bridge/downloading.py``), which runs it on a worker; a search or repo answer that arrives after the user
has moved on is dropped (each request carries a sequence number).
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Slot
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.fmt import human_bytes

from ..context import AppContext
from ..feedback import show_error
from .downloads_panel import DownloadsPanel
from .load_dialog import VERDICTS

PILL_COLORS = {"full_gpu": "#bfe8c4", "partial": "#cfe0fb", "cpu_only": "#fde7c2", "will_not_fit": "#f7c6bf"}
Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()


class RowsModel(QAbstractTableModel):
    """A read-only table of plain rows: ``columns`` names, ``cells(row)`` gives the shown strings."""

    def __init__(self, columns: tuple[str, ...], cells, parent=None, pill=None):
        super().__init__(parent)
        self.columns, self.cells, self.rows = columns, cells, []
        self.pill = pill  # row -> a colour for the last column (the fit pill), or None

    def set_rows(self, rows: list) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def update_row(self, row: int) -> None:
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.columns) - 1), [Qt.DisplayRole])

    def rowCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole):
        if role == Qt.DisplayRole and orientation == Qt.Horizontal and 0 <= section < len(self.columns):
            return self.columns[section]
        return None

    def data(self, index: Index, role: int = Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        if role == Qt.DisplayRole:
            return self.cells(self.rows[index.row()])[index.column()]
        if role == Qt.BackgroundRole and self.pill and index.column() == len(self.columns) - 1:
            color = self.pill(self.rows[index.row()])
            return QColor(color) if color else None
        if role == Qt.ForegroundRole and self.pill and index.column() == len(self.columns) - 1:
            return QColor("#1d1d1d") if self.pill(self.rows[index.row()]) else None
        return None


def _repo_cells(r) -> tuple[str, ...]:
    gated = " (gated)" if r.gated else ""
    return (r.id + gated, f"{r.downloads:,}", f"{r.likes:,}", (r.last_modified or "")[:10])


class DiscoverPage(QWidget):
    """Search and download. Signals: none."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.hub = ctx.bridge.downloads
        self.details = None
        self.fits: dict[str, str] = {}
        self._seq = 0
        self.results = RowsModel(("Repository", "Downloads", "Likes", "Updated"), _repo_cells, self)
        self.verdicts: dict[str, str] = {}
        self.files = RowsModel(("Quantization", "File", "Size", "Fit"), self._file_cells, self,
                               pill=lambda f: PILL_COLORS.get(self.verdicts.get(f.name, "")))
        self._build()

    def _build(self) -> None:
        self.query = QLineEdit(placeholderText="Search GGUF models on Hugging Face (e.g. qwen, llama, smollm)")
        self.query.returnPressed.connect(self.search)
        self.sort = QComboBox()
        self.sort.addItems(["downloads", "likes", "recent", "trending"])
        go = QPushButton("Search", objectName="primary")
        go.clicked.connect(self.search)
        self.embedders = QPushButton("Embedders")
        self.embedders.setToolTip("Models that embed documents, for Settings → Documents (nomic-embed-text, "
                                  "bge, all-MiniLM): passages are then found by meaning as well as by words")
        self.embedders.clicked.connect(self._on_embedders_clicked)
        self.status = QLabel(objectName="discoverStatus")
        self.busy = QProgressBar(maximum=0, visible=False, maximumWidth=140, textVisible=False)  # no fraction
        self.results_view = self._table(self.results)
        self.results_view.selectionModel().currentRowChanged.connect(self._on_results_current_changed)
        self.repo_title = QLabel("<i>Choose a repository to see its files</i>")
        self.files_view = self._table(self.files, stretch=1)
        self.download = QPushButton("Download", objectName="primary", enabled=False)
        self.download.clicked.connect(self._on_download_clicked)
        self.files_view.selectionModel().selectionChanged.connect(self._on_files_selection_changed)
        self.files.modelReset.connect(self._on_files_selection_changed)  # another repo: nothing chosen
        self.downloads = DownloadsPanel(self.hub)
        top = QHBoxLayout()
        for w, stretch in ((self.query, 1), (self.sort, 0), (go, 0), (self.embedders, 0)):
            top.addWidget(w, stretch)
        repo = QWidget()
        repo_lay = QVBoxLayout(repo)
        repo_lay.setContentsMargins(0, 0, 0, 0)
        repo_lay.addWidget(self.repo_title)
        repo_lay.addWidget(self.files_view, 1)
        repo_lay.addWidget(self.download, 0, Qt.AlignRight)
        split = QSplitter()
        split.addWidget(self.results_view)
        split.addWidget(repo)
        split.setSizes([500, 600])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.addLayout(top)
        lay.addLayout(self._status_row())
        lay.addWidget(split, 1)
        lay.addWidget(self.downloads)

    def _status_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(self.busy)
        row.addWidget(self.status, 1)
        return row

    def _table(self, model, stretch: int = 0) -> QTableView:
        view = QTableView(alternatingRowColors=True)
        view.setModel(model)
        view.setSelectionBehavior(QAbstractItemView.SelectRows)
        view.setSelectionMode(QAbstractItemView.SingleSelection)
        view.verticalHeader().hide()
        header = view.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeToContents)  # verdicts and numbers stay readable
        header.setSectionResizeMode(stretch, QHeaderView.Stretch)
        view.setWordWrap(False)
        view.setTextElideMode(Qt.ElideMiddle)
        return view

    def _file_cells(self, f) -> tuple[str, ...]:
        return (f.quant, f.name + (f" (+{len(f.parts) - 1} parts)" if len(f.parts) > 1 else ""),
                human_bytes(f.size), self.fits.get(f.name, "checking…"))

    # --- search and repo -------------------------------------------------------------------------
    @Slot()
    def search(self) -> None:
        self._seq += 1
        seq, query, sort = self._seq, self.query.text().strip(), self.sort.currentText()
        self.status.setText(f"Searching the hub for “{query}”…" if query else "Searching the hub…")
        self.busy.show()
        self.hub.search(query, sort, lambda r, e: self._on_searched(seq, r, e))

    @Slot()
    def _on_embedders_clicked(self) -> None:
        self.query.setText("embed")  # the hub's GGUF embedders carry it in their names
        self.search()

    def _on_searched(self, seq: int, results, error) -> None:
        if seq != self._seq:
            return
        self.busy.hide()
        if error:
            offline = "offline" in str(error)
            self.status.setText("No answer from the hub: you seem to be offline." if offline else "The search failed.")
            show_error(error, "searching the hub")
            return
        self.status.setText(f"{len(results)} repositories" if results else "No GGUF repositories match.")
        self.results.set_rows(results)

    @Slot(QModelIndex, QModelIndex)
    def _on_results_current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.open_repo(self.results.rows[current.row()].id)

    def open_repo(self, repo_id: str) -> None:
        self._seq += 1
        seq = self._seq
        self.repo_title.setText(f"<b>{repo_id}</b> · loading…")
        self.busy.show()
        self.details = None  # Download waits for this repo's files
        self.files.set_rows([])
        self.hub.repo(repo_id, lambda r, e: self._on_repo(seq, r, e))

    def _on_repo(self, seq: int, details, error) -> None:
        if seq != self._seq:
            return
        self.busy.hide()
        if error:
            self.repo_title.setText("")
            show_error(error, "opening the repository")
            return
        self.details, self.fits = details, {}
        self.repo_title.setText(f"<b>{details.id}</b> · {details.license or 'no license given'} · "
                                f"{details.downloads:,} downloads")
        self.files.set_rows(sorted(details.files, key=lambda f: f.size))
        for row, f in enumerate(self.files.rows):
            self.hub.fit(details.id, f, lambda r, e, row=row, f=f: self._on_fit(seq, row, f, r, e))

    def _on_fit(self, seq: int, row: int, file, check, error) -> None:
        if seq != self._seq:
            return
        self.fits[file.name] = f"? ({error})" if error else VERDICTS.get(check.plan.verdict, check.plan.verdict)
        self.verdicts[file.name] = "" if error else check.plan.verdict
        self.files.update_row(row)

    @Slot()
    def _on_files_selection_changed(self, *_args) -> None:
        """Download is live only with a file of the open repo chosen."""
        chosen = bool(self.files_view.selectionModel().selectedRows())
        self.download.setEnabled(chosen and self.details is not None)

    @Slot()
    def _on_download_clicked(self) -> None:
        rows = self.files_view.selectionModel().selectedRows()
        if not rows or self.details is None:
            return
        file = self.files.rows[rows[0].row()]
        self.hub.start(self.details.id, file.name)
