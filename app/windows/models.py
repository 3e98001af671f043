"""The My Models page: every model in the library as a sortable table (name, architecture, parameters,
quantization, size, context, source, last used), with import (a file, a folder, other apps' models),
delete with confirmation, show in the file manager, and per-model defaults (load settings, system
prompt). Listing, importing and deleting go through the bridge, on workers (a delete unloads the model first,
in the same task); the table model only holds plain ``LibraryModel`` rows.

The summary counts disk use as the disk sees it: each file once (by device and inode), and a file that is
a link to another app's copy (an import: a hard link or a symlink) as using no new space.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    QUrl,
    Slot,
)
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QMenu,
    QMessageBox,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from fireside.engine.fmt import human_bytes, human_count

from ..bridge import APPS
from ..context import AppContext
from ..feedback import show_error
from .load_dialog import LoadDialog

APP_NAMES = {"lmstudio": "LM Studio", "ollama": "Ollama", "hf-cache": "Hugging Face cache", "gpt4all": "GPT4All",
             "jan": "Jan"}
COLUMNS = ("Name", "Architecture", "Parameters", "Quantization", "Size", "Context", "Source", "Last used")
SortRole = Qt.UserRole + 1
Index = QModelIndex | QPersistentModelIndex
_ROOT = QModelIndex()


def _ago(ts: float | None) -> str:
    if not ts:
        return "never"
    minutes = (time.time() - ts) / 60
    for limit, unit, size in ((60, "min", 1), (48 * 60, "h", 60), (float("inf"), "d", 1440)):
        if minutes < limit:
            return f"{minutes / size:.0f} {unit} ago"
    return "long ago"


def disk_text(own: int, linked: int) -> str:
    text = f"{human_bytes(own)} on disk"
    return text + (f" · {human_bytes(linked)} more are links to other apps' files (no extra space)" if linked else "")


class ModelsTableModel(QAbstractTableModel):
    """The library as rows; ``last_used`` maps model ids to epoch seconds, ``loaded`` the ids loaded now."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []
        self.last_used: dict[str, float] = {}
        self.loaded: set[str] = set()

    def set_rows(self, rows: list, last_used: dict[str, float]) -> None:
        self.beginResetModel()
        self.rows, self.last_used = list(rows), dict(last_used)
        self.endResetModel()

    def set_loaded(self, loaded: dict[str, float]) -> None:
        """The models loaded now and when each last answered: "Last used" says "loaded now" for them,
        whoever loaded them (the chat, the API server, the command line's runtime)."""
        self.loaded = set(loaded)
        for model_id, used in loaded.items():
            self.last_used[model_id] = max(used or 0.0, self.last_used.get(model_id) or 0.0)
        if self.rows:
            column = len(COLUMNS) - 1
            self.dataChanged.emit(self.index(0, column), self.index(len(self.rows) - 1, column), [Qt.DisplayRole])

    def rowCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: Index = _ROOT) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole):
        if role == Qt.DisplayRole and orientation == Qt.Horizontal and 0 <= section < len(COLUMNS):
            return COLUMNS[section]
        return None

    def data(self, index: Index, role: int = Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self.rows):
            return None
        m = self.rows[index.row()]
        if role == Qt.ToolTipRole:
            return str(m.path)
        if role == Qt.TextAlignmentRole and index.column() in (2, 4, 5):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role not in (Qt.DisplayRole, SortRole):
            return None
        used = self.last_used.get(m.id)
        values = (
            (m.id, m.id.lower()), (m.info.architecture, m.info.architecture),
            (human_count(m.info.parameter_count) if m.info.parameter_count else "?", m.info.parameter_count), (m.quant, m.quant),
            (human_bytes(m.size), m.size), (f"{m.info.context_length:,}", m.info.context_length),
            (m.source, m.source), ("loaded now" if m.id in self.loaded else _ago(used), used or 0.0),
        )
        shown, key = values[index.column()]
        return shown if role == Qt.DisplayRole else key

    def model_at(self, row: int):
        return self.rows[row] if 0 <= row < len(self.rows) else None


class ModelsPage(QWidget):
    """Models on this machine. Signals: none (it talks to the library and the chat's model bar)."""

    def __init__(self, ctx: AppContext, parent: QWidget | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self.table_model = ModelsTableModel(self)
        self.proxy = QSortFilterProxyModel(self, sortRole=SortRole)
        self.proxy.setSourceModel(self.table_model)
        self.table = QTableView(sortingEnabled=True, alternatingRowColors=True)
        self.table.setModel(self.proxy)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.Stretch)
        self.table.setContextMenuPolicy(Qt.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._on_table_menu_requested)
        self.summary = QLabel()
        self.note = ""  # what the last import from another app did, above the summary
        lay = QVBoxLayout(self)
        lay.setContentsMargins(16, 12, 16, 12)
        lay.addLayout(self._toolbar())
        lay.addWidget(self.table, 1)
        lay.addWidget(self.summary)
        ctx.bridge.loaded_changed.connect(self._on_bridge_loaded_changed)
        self.refresh()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        self._on_bridge_loaded_changed()  # a model loaded by the API server or the runtime meanwhile

    @Slot()
    def _on_bridge_loaded_changed(self) -> None:
        self.table_model.set_loaded({m.model_id: m.last_used for m in self.ctx.engine.loaded() if not m.embedding})

    def _toolbar(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("<h2>My Models</h2>"))
        row.addStretch(1)
        actions = (("Refresh", self.refresh), ("Import file…", self._on_import_file_clicked),
                   ("Import folder…", self._on_import_folder_clicked))
        for text, slot in actions:
            button = QPushButton(text)
            button.clicked.connect(slot)
            row.addWidget(button)
        other = QPushButton("Import from other apps")
        menu = QMenu(other)
        for app in APPS:
            menu.addAction(APP_NAMES.get(app, app), lambda a=app: self.import_app(a))
        other.setMenu(menu)
        row.addWidget(other)
        return row

    @Slot()
    def refresh(self) -> None:
        self.ctx.bridge.list_models(self._on_listed)

    def _on_listed(self, listed, error) -> None:
        if error:
            show_error(error, "listing models")
            return
        models, (own, linked) = listed
        self.table_model.set_rows(models, self.ctx.prefs.get("last_used") or {})
        self._on_bridge_loaded_changed()
        self.summary.setText((f"{self.note}\n" if self.note else "") +
                             f"{len(models)} model{'' if len(models) == 1 else 's'} · {disk_text(own, linked)} · "
                             f"folders: {', '.join(str(p) for p in self.ctx.settings.models_dirs)}")

    def selected(self):
        rows = self.table.selectionModel().selectedRows()
        return self.table_model.model_at(self.proxy.mapToSource(rows[0]).row()) if rows else None

    # --- imports ---------------------------------------------------------------------------------
    def import_paths(self, paths: list[Path]) -> None:
        self.ctx.bridge.import_files(paths, partial(self._on_library_changed, "importing"))

    def import_folder(self, folder: Path) -> None:
        self.ctx.bridge.import_folder(folder, partial(self._on_library_changed, "importing"))

    def import_app(self, app: str) -> None:
        name = APP_NAMES.get(app, app)
        self.note = f"Looking for {name}'s models…"
        self.summary.setText(self.note)
        self.ctx.bridge.import_app(app, partial(self._on_app_imported, name))

    def _on_app_imported(self, name: str, result, error) -> None:
        if error:
            self.note = ""
            show_error(error, f"importing from {name}")
        else:
            imported, places = result
            where = ", ".join(str(p) for p in places)
            self.note = (f"Imported {len(imported)} model{'' if len(imported) == 1 else 's'} from {name}." if imported
                         else f"Nothing to import from {name}: no GGUF models in {where}.")
        self.refresh()

    def _on_library_changed(self, what: str, _result, error) -> None:
        """After an import or a delete (on a worker): say what failed, and list the library again."""
        if error:
            show_error(error, what)
        self.refresh()

    @Slot()
    def _on_import_file_clicked(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Import GGUF models", str(Path.home()), "GGUF models (*.gguf)")
        if files:
            self.import_paths([Path(f) for f in files])

    @Slot()
    def _on_import_folder_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Import every GGUF model in a folder")
        if folder:
            self.import_folder(Path(folder))

    # --- per-model actions -----------------------------------------------------------------------
    @Slot("QPoint")
    def _on_table_menu_requested(self, pos) -> None:
        model = self.selected()
        if model is None:
            return
        menu = QMenu(self)
        menu.addAction("Load settings…", lambda: LoadDialog(self.ctx, model.id, self).open())
        menu.addAction("Default system prompt…", lambda: self.edit_system_prompt(model.id))
        menu.addAction("Show in folder", lambda: self.show_in_folder(model))
        menu.addSeparator()
        menu.addAction("Delete…", lambda: self.confirm_delete(model))
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def show_in_folder(self, model) -> bool:
        """Open the model's folder in the file manager; where none can, say where the folder is."""
        folder = model.path.parent
        if QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))):
            return True
        show_error(f"no file manager could open the folder: it is {folder}",
                   f"showing {model.id} in its folder")
        return False

    def edit_system_prompt(self, model_id: str) -> None:
        defaults = (self.ctx.prefs.get("model_defaults") or {}).get(model_id, {})
        text, ok = QInputDialog.getMultiLineText(self, "Default system prompt", f"For new chats with {model_id}:",
                                                 defaults.get("system_prompt", ""))
        if ok:
            self.ctx.prefs.put("model_defaults", model_id, {**defaults, "system_prompt": text})

    def confirm_delete(self, model) -> None:
        box = QMessageBox(QMessageBox.Warning, "Delete model", f"Delete {model.id} ({human_bytes(model.size)})?",
                          QMessageBox.Yes | QMessageBox.Cancel, self)
        box.setInformativeText("Imported models are links: only the link goes, the other app keeps its file.")
        box.finished.connect(lambda result: result == QMessageBox.Yes and self.delete(model.id))
        box.open()

    def delete(self, model_id: str) -> None:
        self.ctx.bridge.delete_model(model_id, partial(self._on_library_changed, "deleting the model"))
