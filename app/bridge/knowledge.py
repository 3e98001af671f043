"""Knowledge collections as the app shows them: listed, made from files or from a watched folder, rescanned
and deleted, each call on the task pool answering through ``on_done`` on the GUI thread. The collections
are the app's one ``Collections`` (``bridge.embedder.collections()``), so what the Knowledge page lists
is what the app's API server serves as vector stores, and a chat that ticks one searches the same index.
Owned by the bridge (``bridge.knowledge``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fireside.engine.errors import DocumentRejected

from .tasks import OnDone

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KnowledgeRow:
    """A collection as the page lists it: the ``Collection`` (counts, name), the folder it watches (or
    None), how many files there were refused, and the files that failed or were refused, with the reason."""

    collection: Any
    folder: Path | None
    refused: int
    failed: dict[str, str]


class KnowledgeController:
    """The app's knowledge collections, off the GUI thread. ``collections``: returns the ``Collections``
    (blocking; called on a worker)."""

    def __init__(self, collections: Callable[[], Any], tasks):
        self.collections, self.tasks = collections, tasks

    def start_watching(self) -> None:
        """Rescan the watched folders every 30 seconds while the app runs (stopped when the collections close)."""
        self.tasks.run_in_background(lambda: self.collections().watcher.start())

    def list(self, on_done: OnDone) -> None:
        """``on_done([KnowledgeRow, ...])``, oldest first."""
        self.tasks.run_in_background(self._list, on_done)

    def _list(self) -> list[KnowledgeRow]:
        c = self.collections()
        watched = {w.collection_id: w for w in c.watcher.folders()}
        rows = []
        for collection in c.list():
            failed = {}
            if collection.counts.get("failed"):
                for m in c.members(collection.id, status="failed"):
                    failed[c.uploads.get(m.file_id).filename] = m.error_message or m.error_code or ""
            w = watched.get(collection.id)
            if w is not None and w.refused:
                failed.update(c.watcher.refusals(collection.id))
            rows.append(KnowledgeRow(collection, w.folder if w else None, w.refused if w else 0, failed))
        return rows

    def create_from_files(self, name: str, paths: list[Path], on_done: OnDone) -> None:
        """A new collection of copies of ``paths``: ``on_done((collection, {file name: why refused}))``;
        a file the uploads refuse is left out and named, the others still go in."""
        def work():
            c = self.collections()
            ids, refused = [], {}
            for path in paths:
                try:
                    with open(path, "rb") as fh:
                        ids.append(c.uploads.save(fh, Path(path).name, "assistants").id)
                except DocumentRejected as exc:
                    refused[Path(path).name] = str(exc)
                except OSError as exc:
                    refused[Path(path).name] = f"cannot be read: {exc.strerror or exc}"
            if not ids:
                raise DocumentRejected("No collection made: " + "; ".join(f"{k}: {v}" for k, v in refused.items())
                                       if refused else "No collection made: no files were chosen", "unsupported")
            return c.create(name or Path(paths[0]).stem, ids), refused
        self.tasks.run_in_background(work, on_done)

    def watch_folder(self, folder: Path, on_done: OnDone, name: str = "") -> None:
        """A new collection that follows ``folder``: ``on_done(collection)`` once its first scan is done."""
        self.tasks.run_in_background(lambda: self.collections().watcher.watch(folder, name), on_done)

    def rescan(self, collection_id: str, on_done: OnDone) -> None:
        """``on_done(Scan)``: the folder's new and changed files queued for indexing, deleted ones taken out."""
        self.tasks.run_in_background(lambda: self.collections().watcher.rescan(collection_id), on_done)

    def delete(self, collection_id: str, on_done: OnDone) -> None:
        self.tasks.run_in_background(lambda: self.collections().delete(collection_id), on_done)

    def search(self, collection_ids: list[str], query: str, k: int):
        """The passages of ``collection_ids`` that best answer ``query`` (blocking: the reply's worker calls it);
        a collection deleted since the chat ticked it is skipped."""
        c = self.collections()
        known = {x.id for x in c.list()}
        return c.search([i for i in collection_ids if i in known], query, k)

    def path(self, file_id: str) -> Path:
        """Where a collection's file is kept (blocking)."""
        return self.collections().uploads.get(file_id).path

    def names(self, collection_ids: list[str]) -> dict[str, str]:
        """The names of those of ``collection_ids`` that still exist (blocking)."""
        return {x.id: x.name for x in self.collections().list() if x.id in collection_ids}
