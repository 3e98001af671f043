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
    None) and how many files there were refused."""

    collection: Any
    folder: Path | None
    refused: int


@dataclass(frozen=True)
class KnowledgeFile:
    """A file of a collection as the page lists it: its name (its path in a watched folder), its status
    (``in_progress``, ``completed``, ``failed``; ``refused`` for a folder's file the uploads refused), the
    passages it gave, its size and why it failed."""

    name: str
    status: str
    chunks: int
    size: int
    reason: str = ""


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
            w = watched.get(collection.id)
            rows.append(KnowledgeRow(collection, w.folder if w else None, w.refused if w else 0))
        return rows

    def files(self, collection_id: str, on_done: OnDone) -> None:
        """``on_done([KnowledgeFile, ...])``: the collection's files, by name."""
        def work():
            c = self.collections()
            paths = c.watcher.paths(collection_id)
            out = []
            for m in c.members(collection_id):
                stored = c.uploads.get(m.file_id)
                out.append(KnowledgeFile(paths.get(m.file_id, stored.filename), m.status, m.chunks, stored.bytes,
                                         m.error_message or ""))
            out += [KnowledgeFile(path, "refused", 0, 0, why) for path, why in c.watcher.refusals(collection_id).items()]
            return sorted(out, key=lambda f: f.name.lower())
        self.tasks.run_in_background(work, on_done)

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

    def rename(self, collection_id: str, name: str, on_done: OnDone) -> None:
        """``on_done(collection)`` with its new name."""
        self.tasks.run_in_background(lambda: self.collections().update(collection_id, name=name), on_done)

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
