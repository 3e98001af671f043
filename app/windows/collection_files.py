"""The lower list of the Knowledge page (``knowledge.py``): the selected collection's files, one row each with
its state (and why it failed or was refused), its passages once indexed, and its size. The page reads the
files through the bridge and hands them here; a row selected in the collections list above keeps its files
shown until their new list comes, so the page's once-a-second polling does not flicker.
"""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QTreeWidget, QTreeWidgetItem, QWidget

from fireside.engine.fmt import human_bytes

FILE_COLUMNS = ("File", "State", "Passages", "Size")
STATES = {"in_progress": "indexing…", "completed": "indexed", "failed": "failed", "cancelled": "cancelled",
          "refused": "refused"}


def describe_file(f) -> tuple[str, str, str, str]:
    """The four cells of a file's row: its name, its state (with the reason it failed), passages, size."""
    state = STATES.get(f.status, f.status)
    if f.reason:
        state += f": {f.reason}"
    return f.name, state, str(f.chunks) if f.status == "completed" else "", human_bytes(f.size) if f.size else ""


class CollectionFiles(QTreeWidget):
    """One collection's files; ``collection_id`` is the collection they are of (or are about to be)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("knowledgeFiles")
        self.setRootIsDecorated(False)
        self.setUniformRowHeights(True)
        self.setHeaderLabels(FILE_COLUMNS)
        self.header().setSectionResizeMode(1, QHeaderView.Stretch)
        self.collection_id: str | None = None

    def follow(self, collection_id: str | None) -> None:
        """The files of ``collection_id`` are shown next: another collection's rows go at once, the same
        collection's stay until its new list comes (None: no collection, no rows)."""
        if collection_id is None or collection_id != self.collection_id:
            self.clear()
        self.collection_id = collection_id

    def show_files(self, files) -> None:
        self.clear()
        for f in files:
            item = QTreeWidgetItem(list(describe_file(f)))
            item.setToolTip(1, item.text(1))
            self.addTopLevelItem(item)
        for column in (0, 2, 3):
            self.resizeColumnToContents(column)
