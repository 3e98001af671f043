"""Knowledge collections: named sets of uploaded files, each collection searched through its own
``DocumentIndex`` (``indexes/<id>.sqlite3``), the sets and their files' states kept in the registry. The
API serves them as OpenAI's vector stores; the app can list the same ones as its collections.

A file added to a collection is ``in_progress`` until its collection's worker has indexed it in the
background (``indexing.py``), then ``completed``, or ``failed`` with a code and a message that says what is
wrong. Search reads a file as soon as its text is indexed: by keywords until its vectors come. With no
``Embedder`` the indexes find passages by BM25 alone.

A passage's ``score`` is its fused score in 0..1 (``index.py``): a passage first in every ranking scores 1;
it orders passages, it is not a probability.

Threading: every method may be called from any thread; they read and write the disk, so a server calls
them off its event loop. ``close`` stops the workers (within one embedding batch) and closes the files.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DocumentNotFound
from .index import DocumentIndex, Embedder
from .indexing import Embedding, Indexer, gated
from .query import clipped_query
from .registry import Registry
from .uploads import Uploads

STATUSES = ("in_progress", "completed", "failed", "cancelled")


@dataclass(frozen=True)
class Collection:
    """A collection: its files' ``counts`` by status (and ``total``) and the bytes they hold."""

    id: str
    name: str
    metadata: dict
    created_at: int
    last_active_at: int
    counts: dict[str, int] = field(default_factory=dict)
    usage_bytes: int = 0

    @property
    def status(self) -> str:
        return "in_progress" if self.counts.get("in_progress") else "completed"


@dataclass(frozen=True)
class Member:
    """A file in a collection and how its indexing went (``error_code``/``error_message`` when failed)."""

    collection_id: str
    file_id: str
    status: str
    error_code: str | None
    error_message: str | None
    chunks: int
    usage_bytes: int
    batch_id: str | None
    created_at: int


@dataclass(frozen=True)
class Passage:
    """A passage found in a collection's file, with where it lies (``heading``, ``page``)."""

    collection_id: str
    file_id: str
    filename: str
    score: float
    text: str
    heading: str = ""
    page: int | None = None
    found_by: str = "bm25"  # how its collection was searched: "bm25" (keywords alone) or "fused" (and by meaning)


class Collections:
    """Every collection and uploaded file under ``root`` (the data folder's ``knowledge``)."""

    def __init__(self, root: Path, embedder: Embedder | None = None):
        self.root, self.embedder = Path(root), gated(embedder)
        self._opening = threading.Lock()
        self._registry: Registry | None = None
        self._uploads: Uploads | None = None
        self._indexes: dict[str, DocumentIndex] = {}
        self._indexer = Indexer(self)  # each collection's worker and its queue (indexing.py)
        self._watcher = None

    # --- opening -------------------------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        """The registry, opened on first use (then any file left ``in_progress`` is queued again)."""
        with self._opening:
            if self._registry is None:
                self._registry = Registry(self.root / "registry.sqlite3")
                self._uploads = Uploads(self._registry, self.root / "files")
                self._indexer.resume(self._registry)
            return self._registry

    @property
    def uploads(self) -> Uploads:
        self.registry  # noqa: B018 - opens the registry, which makes the uploads
        return self._uploads

    @property
    def watcher(self):
        """The folders the collections watch (``watching.py``), made on first use."""
        from .watching import Watcher

        with self._opening:
            if self._watcher is None:
                self._watcher = Watcher(self)
            return self._watcher

    def _index(self, collection_id: str) -> DocumentIndex:
        with self._opening:
            if collection_id not in self._indexes:
                path = self.root / "indexes" / f"{collection_id}.sqlite3"
                path.parent.mkdir(parents=True, exist_ok=True)
                self._indexes[collection_id] = DocumentIndex(path, self.embedder)
                if self.embedder is not None:  # passages without this embedder's vectors get them, in the background
                    self._indexer.enqueue(collection_id, None)
            return self._indexes[collection_id]

    def use_embedder(self, embedder: Embedder | None) -> None:
        """Embed with ``embedder`` from now on (None: BM25 alone); every collection is re-embedded in the
        background, and searches find passages by keywords until its vectors are made."""
        self.embedder = embedder = gated(embedder)
        with self._opening:
            opened = dict(self._indexes)
        for index in opened.values():
            index.use(embedder)  # an embedding under way stops at its next batch
        self._indexer.restart_progress()
        if embedder is not None:
            for collection in self.list():
                self._indexer.queue_embedding(collection.id, self._index(collection.id).missing_vectors())

    def embedding(self) -> Embedding | None:
        """The background embedding under way, or None once every passage has its vector (or with no
        embedder); a run that stopped short stays, with its ``error``, until the embedder changes."""
        return self._indexer.progress(self.embedder)

    # --- collections ---------------------------------------------------------------------------------
    def create(self, name: str = "", file_ids: list[str] = (), metadata: dict | None = None) -> Collection:
        """A new collection holding ``file_ids`` (indexed in the background); an unknown id refuses it all."""
        for file_id in file_ids:
            self.uploads.get(file_id)
        collection_id, now = f"vs_{uuid.uuid4().hex[:24]}", int(time.time())
        reg = self.registry
        with reg.lock, reg.db:
            reg.db.execute("INSERT INTO collections VALUES(?,?,?,?,?)",
                           (collection_id, name, json.dumps(metadata or {}), now, now))
        self._add_all(collection_id, list(file_ids))
        return self.get(collection_id)

    def get(self, collection_id: str) -> Collection:
        reg = self.registry
        with reg.lock:
            row = reg.db.execute("SELECT * FROM collections WHERE id = ?", (collection_id,)).fetchone()
            if row is None:
                raise DocumentNotFound(f"no vector store with id {collection_id!r}", "collection", "vector_store_id")
            counts = dict.fromkeys(STATUSES, 0)
            usage = 0
            for status, count, used in reg.db.execute("SELECT status, count(*), sum(usage_bytes) FROM members "
                                                      "WHERE collection_id = ? GROUP BY status", (collection_id,)):
                counts[status], usage = count, usage + (used or 0)
        counts["total"] = sum(counts.values())
        return Collection(row[0], row[1], json.loads(row[2]), row[3], row[4], counts, usage)

    def list(self) -> list[Collection]:
        """Every collection, oldest first."""
        with self.registry.lock:
            ids = [r[0] for r in self.registry.db.execute("SELECT id FROM collections ORDER BY created_at, rowid")]
        return [self.get(i) for i in ids]

    def update(self, collection_id: str, name: str | None = None, metadata: dict | None = None) -> Collection:
        self.get(collection_id)
        reg = self.registry
        with reg.lock, reg.db:
            if name is not None:
                reg.db.execute("UPDATE collections SET name = ? WHERE id = ?", (name, collection_id))
            if metadata is not None:
                reg.db.execute("UPDATE collections SET metadata = ? WHERE id = ?", (json.dumps(metadata), collection_id))
        return self.get(collection_id)

    def delete(self, collection_id: str) -> None:
        """Forget the collection and its index; its files stay uploaded (a watched folder's copies go)."""
        self.get(collection_id)
        self.watcher.forget_collection(collection_id)
        self._indexer.stop(collection_id, every=True)
        # its stopped work ends (within a page or a batch) before its index closes
        self._indexer.wait(collection_id, timeout=10)
        reg = self.registry
        with reg.lock, reg.db:
            reg.db.execute("DELETE FROM members WHERE collection_id = ?", (collection_id,))
            reg.db.execute("DELETE FROM collections WHERE id = ?", (collection_id,))
        with self._opening:
            index = self._indexes.pop(collection_id, None)
        if index is not None:
            index.close()
        for suffix in ("", "-wal", "-shm"):
            (self.root / "indexes" / f"{collection_id}.sqlite3{suffix}").unlink(missing_ok=True)

    # --- members -------------------------------------------------------------------------------------
    def add(self, collection_id: str, file_id: str, batch_id: str | None = None) -> Member:
        """Put ``file_id`` in the collection and queue it for indexing; a file already there stays as it is."""
        self._add_all(collection_id, [file_id], batch_id)
        return self.member(collection_id, file_id)

    def _add_all(self, collection_id: str, file_ids: list[str], batch_id: str | None = None) -> None:
        """The files made members, then queued together: every one's text is read before vectors are made."""
        self.get(collection_id)
        for file_id in file_ids:
            self.uploads.get(file_id)
        reg = self.registry
        with reg.lock, reg.db:
            added = [f for f in dict.fromkeys(file_ids) if reg.db.execute(
                "INSERT OR IGNORE INTO members(collection_id, file_id, status, batch_id, created_at) "
                "VALUES(?,?,'in_progress',?,?) RETURNING file_id",
                (collection_id, f, batch_id, int(time.time()))).fetchall()]
        for file_id in added:
            self._indexer.enqueue(collection_id, file_id)

    def add_batch(self, collection_id: str, file_ids: list[str]) -> str:
        """Add several files as one batch (all known, or none added); returns the batch's id."""
        self.get(collection_id)
        for file_id in file_ids:
            self.uploads.get(file_id)
        batch_id = f"vsfb_{uuid.uuid4().hex[:24]}"
        self._add_all(collection_id, list(file_ids), batch_id)
        return batch_id

    def members(self, collection_id: str, status: str | None = None, batch_id: str | None = None) -> list[Member]:
        """The collection's files (those with ``status``, or of ``batch_id``), oldest first."""
        self.get(collection_id)
        with self.registry.lock:
            rows = self.registry.db.execute(
                "SELECT * FROM members WHERE collection_id = ?1 AND (?2 IS NULL OR status = ?2) AND "
                "(?3 IS NULL OR batch_id = ?3) ORDER BY created_at, rowid", (collection_id, status, batch_id)).fetchall()
        return [Member(*r) for r in rows]

    def member(self, collection_id: str, file_id: str) -> Member:
        with self.registry.lock:
            row = self.registry.db.execute("SELECT * FROM members WHERE collection_id = ? AND file_id = ?",
                                           (collection_id, file_id)).fetchone()
        if row is None:
            self.get(collection_id)
            raise DocumentNotFound(f"no file {file_id!r} in vector store {collection_id!r}", "file", "file_id")
        return Member(*row)

    def remove(self, collection_id: str, file_id: str) -> None:
        """Take the file out of the collection and its index (the upload stays)."""
        member = self.member(collection_id, file_id)
        self._indexer.stop(collection_id, file_id)
        reg = self.registry
        with reg.lock, reg.db:
            reg.db.execute("DELETE FROM members WHERE collection_id = ? AND file_id = ?", (collection_id, file_id))
        if member.status == "completed":
            self._index(collection_id).remove_file(self.uploads.get(file_id).path)

    def cancel_batch(self, collection_id: str, batch_id: str) -> None:
        """Files of the batch not yet indexed are ``cancelled`` (a file being read stops, and is dropped)."""
        reg = self.registry
        with reg.lock, reg.db:
            stopped = reg.db.execute("UPDATE members SET status = 'cancelled' WHERE collection_id = ? AND batch_id = ? "
                                     "AND status = 'in_progress' RETURNING file_id", (collection_id, batch_id)).fetchall()
        for (file_id,) in stopped:
            self._indexer.stop(collection_id, file_id)

    def delete_file(self, file_id: str) -> None:
        """Take ``file_id`` out of every collection, then delete the upload."""
        self.uploads.get(file_id)
        with self.registry.lock:
            holders = [r[0] for r in self.registry.db.execute("SELECT collection_id FROM members WHERE file_id = ?",
                                                              (file_id,))]
        for collection_id in holders:
            self.remove(collection_id, file_id)
        self.uploads.delete(file_id)

    # --- searching -----------------------------------------------------------------------------------
    def search(self, collection_ids: list[str], query: str, k: int = 10) -> list[Passage]:
        """The ``k`` passages of the collections' completed files that best answer ``query``, best first.
        A query past the caps is searched as ``clipped_query`` leaves it (``query_over`` says so first)."""
        query = clipped_query(query)
        found: list[Passage] = []
        for collection_id in dict.fromkeys(collection_ids):
            ready = {m.file_id for m in self.members(collection_id)
                     if m.status == "completed" or (m.status == "in_progress" and m.chunks)}  # vectors on their way
            if not ready:
                continue
            names = {f: self.uploads.get(f).filename for f in ready}
            result = self._index(collection_id).search(query, k=k + 10)
            for hit in result.hits:
                file_id = Path(hit.path).parent.name
                if file_id in ready:
                    found.append(Passage(collection_id, file_id, names[file_id], max(0.0, min(1.0, hit.score)), hit.text,
                                         hit.heading, hit.page, result.mode))
            self._touch(collection_id)
        return sorted(found, key=lambda p: -p.score)[:k]

    def _touch(self, collection_id: str) -> None:
        with self.registry.lock, self.registry.db:
            self.registry.db.execute("UPDATE collections SET last_active_at = ? WHERE id = ?",
                                     (int(time.time()), collection_id))

    def close(self) -> None:
        """Stop the watcher and the worker and close every file; safe to call twice."""
        if self._watcher is not None:
            self._watcher.stop()
        self._indexer.close()
        with self._opening:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
            if self._registry is not None:
                self._registry.close()
                self._registry = None

