"""Knowledge collections: named sets of uploaded files, each collection searched through its own
``DocumentIndex`` (``indexes/<id>.sqlite3``), the sets and their files' states kept in the registry. The
API serves them as OpenAI's vector stores; the app can list the same ones as its collections.

A file added to a collection is ``in_progress`` until a background worker (a daemon thread, never the
caller's) has read, chunked and indexed it and made its passages' vectors, then ``completed``, or
``failed`` with a code (``invalid_file``, ``unsupported_file``, ``server_error``) and a message that says
what is wrong. Each collection has its own worker, started when it has work and gone when it has none,
so one collection's long file never holds up another's (a 22-byte note waited an hour behind a hostile
PDF when one thread served them all). In a collection, every queued file's text is indexed before
vectors are made (in batches, a file at a time, each file ``completed`` as its vectors are done, so
``file_counts`` shows the progress), and search reads a file as soon as its text is indexed: by keywords
until its vectors come. Each queued file has its own stop event: removing the file from its
collection, deleting the upload or the collection, or cancelling its batch stops its reading at once (the
file is read in the worker's reader process, ``reader_process.py``, which is killed) and its embedding
within a batch. Files still ``in_progress`` when the process
stopped are indexed again when the collections are next opened, unless the process died while reading
the file ``MAX_TRIES`` times: then it is ``failed`` (a file that kills the process would otherwise kill
every start). With no ``Embedder`` the indexes find passages by BM25 alone, and a file is ``completed``
once its text is in.

A passage's ``score`` is its fused score in 0..1 (``index.py``): a passage first in every ranking scores 1;
it orders passages, it is not a probability.

Threading: every method may be called from any thread; they read and write the disk, so a server calls
them off its event loop. ``close`` stops the worker (within one embedding batch) and closes the files.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DocumentNotFound, DocumentRejected
from .index import DocumentIndex, Embedder
from .limits import MAX_QUERY_CHARS, MAX_QUERY_TERMS
from .pdf import Cancelled
from .reader_process import ReaderProcess
from .registry import Registry
from .uploads import Uploads

log = logging.getLogger(__name__)
STATUSES = ("in_progress", "completed", "failed", "cancelled")
# a refusal's error code by its reason; any other is ``invalid_file``
_CODES = {"unsupported": "unsupported_file", "binary": "unsupported_file", "reader_died": "server_error"}
MAX_TRIES = 2  # processes that may die reading one file before it is failed instead of read again


_WORD = re.compile(r"\w+")


EMBEDDING_AT_ONCE = 2  # embedder calls in flight from every collection's worker (and searches) together
_embedding = threading.BoundedSemaphore(EMBEDDING_AT_ONCE)


def _gated(embedder: Embedder | None) -> Embedder | None:
    """``embedder`` taking turns: each collection has its own worker, and twenty re-embedding at once (a new
    embedder chosen) would fill the model's queue (16) and leave their passages without vectors."""
    if embedder is None:
        return None

    def embed(texts: list[str]) -> list[list[float]]:
        with _embedding:
            return embedder.embed(texts)

    return Embedder(embedder.name, embed)


def _background() -> None:
    """Lower the calling thread's CPU priority (Linux, where a thread has its own nice value), as the
    runner's helper threads do (``runner/threads.py``): reading a document can wait, while a
    model's decode threads and the server relaying its tokens take the cores (on two cores a PDF being
    parsed at full priority stalled another client's stream 2.4 s)."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except OSError:
            pass


def query_over(query: str) -> str | None:
    """Why ``query`` is too much to search (each distinct word is an OR term of the keyword search), or None."""
    if len(query) > MAX_QUERY_CHARS:
        return (f"the query is {len(query):,} characters; a search takes up to {MAX_QUERY_CHARS:,} characters and "
                f"{MAX_QUERY_TERMS} distinct words: search with the words that matter")
    terms = len(set(_WORD.findall(query.lower())))
    if terms > MAX_QUERY_TERMS:
        return (f"the query has {terms:,} distinct words; a search takes up to {MAX_QUERY_TERMS} (each is a search "
                "term): search with the words that matter")
    return None


def clipped_query(query: str) -> str:
    """``query`` within the caps: its first ``MAX_QUERY_CHARS`` characters, and of those the words up to the
    ``MAX_QUERY_TERMS``th distinct one (a long message searched as a file_search query)."""
    query = query[:MAX_QUERY_CHARS]
    seen: set[str] = set()
    for m in _WORD.finditer(query):
        seen.add(m.group().lower())
        if len(seen) > MAX_QUERY_TERMS:
            return query[:m.start()]
    return query


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
class Embedding:
    """The background embedding after a change of embedder (or of passages still without vectors): which
    model, how many passages of how many have their vectors, and why it stopped short (``error``)."""

    embedder: str
    done: int
    total: int
    error: str = ""


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
        self.root, self.embedder = Path(root), _gated(embedder)
        self._opening = threading.Lock()
        self._registry: Registry | None = None
        self._uploads: Uploads | None = None
        self._indexes: dict[str, DocumentIndex] = {}
        # collection -> (file to index, or None: passages to embed; its stop event), queued and running
        self._pending: dict[str, deque[tuple[str | None, threading.Event]]] = {}
        self._running: dict[str, tuple[str | None, threading.Event]] = {}
        self._workers: dict[str, threading.Thread] = {}  # collection -> its worker, while it has work
        self._spare: ReaderProcess | None = None  # a reader process kept from a worker that ended, for the next
        self._jobs = threading.Lock()  # guards the four above
        self._cancel = threading.Event()
        self._watcher = None
        self._progress: dict[str, tuple[int, int]] = {}  # collection id -> (embedded, to embed) this run
        self._embed_error = ""
        self._progress_lock = threading.Lock()

    # --- opening -------------------------------------------------------------------------------------
    @property
    def registry(self) -> Registry:
        """The registry, opened on first use (then any file left ``in_progress`` is queued again)."""
        with self._opening:
            if self._registry is None:
                self._registry = Registry(self.root / "registry.sqlite3")
                self._uploads = Uploads(self._registry, self.root / "files")
                for item in self._resumable(self._registry):
                    self._enqueue(*item)
            return self._registry

    @staticmethod
    def _resumable(reg: Registry) -> list[tuple[str, str]]:
        """The files left ``in_progress`` when the process stopped, to index again; one whose reading was
        begun ``MAX_TRIES`` times and never ended (the process died each time) fails instead."""
        with reg.lock, reg.db:
            reg.db.execute("DELETE FROM reading WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.collection_id = "
                           "reading.collection_id AND m.file_id = reading.file_id AND m.status = 'in_progress')")
            reg.db.execute("UPDATE members SET status = 'failed', error_code = 'server_error', error_message = ? "
                           "WHERE status = 'in_progress' AND EXISTS (SELECT 1 FROM reading r WHERE r.collection_id = "
                           "members.collection_id AND r.file_id = members.file_id AND r.tries >= ?)",
                           (f"indexing it stopped the process {MAX_TRIES} times; remove the file and add it again "
                            "to try once more", MAX_TRIES))
            return reg.db.execute("SELECT collection_id, file_id FROM members WHERE status = 'in_progress' "
                                  "ORDER BY created_at").fetchall()

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
                    self._enqueue(collection_id, None)
            return self._indexes[collection_id]

    def use_embedder(self, embedder: Embedder | None) -> None:
        """Embed with ``embedder`` from now on (None: BM25 alone); every collection is re-embedded in the
        background, and searches find passages by keywords until its vectors are made."""
        self.embedder = embedder = _gated(embedder)
        with self._opening:
            opened = dict(self._indexes)
        for index in opened.values():
            index.use(embedder)  # an embedding under way stops at its next batch
        with self._progress_lock:
            self._progress, self._embed_error = {}, ""
        if embedder is not None:
            for collection in self.list():
                missing = self._index(collection.id).missing_vectors()
                if missing:
                    with self._progress_lock:
                        self._progress[collection.id] = (0, missing)
                self._enqueue(collection.id, None)

    def embedding(self) -> Embedding | None:
        """The background embedding under way, or None once every passage has its vector (or with no
        embedder); a run that stopped short stays, with its ``error``, until the embedder changes."""
        embedder = self.embedder
        with self._progress_lock:
            if embedder is None or not self._progress:
                return None
            done = sum(d for d, _ in self._progress.values())
            total = sum(t for _, t in self._progress.values())
            if done >= total and not self._embed_error:
                return None
            return Embedding(embedder.name, done, total, self._embed_error)

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
        self._stop(collection_id, every=True)
        with self._jobs:
            worker = self._workers.get(collection_id)
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=10)  # its stopped work ends (within a page or a batch) before its index closes
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
            self._enqueue(collection_id, file_id)

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
        self._stop(collection_id, file_id)
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
            self._stop(collection_id, file_id)

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

    # --- indexing, on each collection's worker thread ----------------------------------------------
    def _enqueue(self, collection_id: str, file_id: str | None) -> None:
        """Queue a file to index, or (``file_id`` None) a collection's passages to embed, on the collection's
        own worker (started if it has none). A file's text goes before any embedding queued (keywords find it
        at once; its vectors follow), and one embedding queued is enough."""
        with self._jobs:
            if self._cancel.is_set():
                return
            pending = self._pending.setdefault(collection_id, deque())
            embedding = next((i for i, (f, _) in enumerate(pending) if f is None), None)
            if file_id is None:
                if embedding is None:
                    pending.append((None, threading.Event()))
            else:
                pending.insert(len(pending) if embedding is None else embedding, (file_id, threading.Event()))
            if collection_id not in self._workers:
                worker = threading.Thread(target=self._work, args=(collection_id,), daemon=True,
                                          name=f"fireside-indexer-{collection_id}")
                self._workers[collection_id] = worker
                worker.start()

    def _stop(self, collection_id: str, file_id: str | None = None, every: bool = False) -> None:
        """Stop the work queued or running for one file of the collection (``every``: all its work)."""
        with self._jobs:
            items = [*self._pending.get(collection_id, ()), *([self._running[collection_id]]
                                                                if collection_id in self._running else [])]
        for item, stop in items:
            if every or item == file_id:
                stop.set()

    def _work(self, collection_id: str) -> None:
        _background()
        with self._jobs:  # the last worker's reader process if one waits (a start is ~0.2 s), else a new one
            reader, self._spare = self._spare or ReaderProcess(), None
        try:
            while True:
                with self._jobs:
                    self._running.pop(collection_id, None)
                    pending = self._pending.get(collection_id)
                    if self._cancel.is_set() or not pending:
                        self._pending.pop(collection_id, None)
                        self._workers.pop(collection_id, None)
                        return
                    file_id, stop = self._running[collection_id] = pending.popleft()
                if stop.is_set():
                    continue
                try:
                    if file_id is None:
                        self._embed(collection_id, stop)
                    else:
                        self._index_one(collection_id, file_id, stop, reader)
                except Exception:  # noqa: BLE001 - the worker must outlive any one file
                    log.exception("indexing %s into %s failed", file_id or "passages", collection_id)
        finally:
            self._park(reader)

    def _park(self, reader: ReaderProcess) -> None:
        """Keep a worker's reader process for the next worker (one is kept), or close it."""
        with self._jobs:
            if reader.pid is not None and self._spare is None and not self._cancel.is_set():
                self._spare, reader = reader, None
        if reader is not None:
            reader.close()

    def _embed(self, collection_id: str, stop: threading.Event) -> None:
        """Vectors for the collection's passages that lack them: the files whose text is indexed first, each
        ``completed`` once its vectors are made, then any other passage (a new embedder, an embedding cut short)."""
        try:
            waiting = [m for m in self.members(collection_id, status="in_progress") if m.chunks]
        except DocumentNotFound:
            return  # deleted while it waited
        index, pause = self._index(collection_id), _Pause(self, collection_id, stop)
        embedder, total, before = index.embedder, index.missing_vectors(), 0

        def on_progress(done: int, _of: int) -> None:  # over the whole run: the files one after another
            with self._progress_lock:
                if self.embedder is embedder:  # not a run the user has changed their mind about
                    self._progress[collection_id] = (before + done, max(total, before + done))

        if total:
            on_progress(0, total)
        embedded = 0
        for member in waiting:
            try:
                path = self.uploads.get(member.file_id).path
            except DocumentNotFound:
                continue  # removed while it waited
            n = index.embed_missing(cancel=pause, path=path, on_progress=on_progress)
            embedded, before = embedded + n, before + n
            if pause.is_set():  # stopped, closing, or a file added meanwhile is read first (then the vectors go on)
                if not self._cancel.is_set() and not stop.is_set():
                    self._enqueue(collection_id, None)
                return
            # done (an embedder that failed leaves the file to keywords, and completed too)
            self._finish(collection_id, member.file_id, "completed", chunks=member.chunks, usage=member.usage_bytes)
        embedded += index.embed_missing(cancel=pause, on_progress=on_progress)
        if index.embed_error and self.embedder is embedder:
            with self._progress_lock:
                self._embed_error = index.embed_error
        if embedded:
            log.info("embedded %d passages of %s", embedded, collection_id)

    def _text_waiting(self, collection_id: str) -> bool:
        with self._jobs:
            return any(f is not None for f, _ in self._pending.get(collection_id, ()))

    def _index_one(self, collection_id: str, file_id: str, stop: threading.Event, reader: ReaderProcess) -> None:
        try:
            member = self.member(collection_id, file_id)
            stored = self.uploads.get(file_id)
        except DocumentNotFound:
            return  # removed while it waited
        if member.status != "in_progress":
            return
        index = self._index(collection_id)
        self._reading(collection_id, file_id, True)
        try:
            self._read(index, member, stored, stop, reader)
        finally:  # ended here, one way or another: only a process that died leaves the row (``_resumable``)
            self._reading(collection_id, file_id, False)

    def _reading(self, collection_id: str, file_id: str, begun: bool) -> None:
        reg = self.registry
        with reg.lock, reg.db:
            if begun:
                reg.db.execute("INSERT INTO reading VALUES(?, ?, 1) ON CONFLICT DO UPDATE SET tries = tries + 1",
                               (collection_id, file_id))
            else:
                reg.db.execute("DELETE FROM reading WHERE collection_id = ? AND file_id = ?", (collection_id, file_id))

    def _read(self, index: DocumentIndex, member: Member, stored, stop: threading.Event, reader: ReaderProcess) -> None:
        collection_id, file_id = member.collection_id, member.file_id
        try:  # read in the reader process; vectors: _embed, after the text
            done = index.add_file(stored.path, cancel=stop, embed=False, read=reader.read)
            if stop.is_set():
                raise Cancelled(f"indexing {stored.filename} was stopped")
            if done.chunks == 0:
                raise DocumentRejected(f"{stored.filename} holds no text to search (a scanned PDF, or an empty "
                                       "document?)", "empty", stored.filename)
        except Cancelled:  # removed, cancelled or closing: a removal took the row, a close leaves it queued
            index.remove_file(stored.path)
            return
        except DocumentRejected as e:
            index.remove_file(stored.path)
            self._finish(collection_id, file_id, "failed", _CODES.get(e.reason, "invalid_file"), str(e))
            return
        except Exception as e:  # noqa: BLE001 - a reader's bug fails this file, never the worker
            log.exception("indexing %s failed", stored.filename)
            self._finish(collection_id, file_id, "failed", "server_error", f"indexing failed: {type(e).__name__}: {e}")
            return
        if self.embedder is not None:  # searchable by keywords now, completed when its vectors are made
            if self._text_indexed(collection_id, file_id, done.chunks, stored.bytes):
                self._enqueue(collection_id, None)
                return
        elif self._finish(collection_id, file_id, "completed", chunks=done.chunks, usage=stored.bytes):
            return
        with self.registry.lock:
            now = self.registry.db.execute("SELECT status FROM members WHERE collection_id = ? AND file_id = ?",
                                           (collection_id, file_id)).fetchone()
        if now is None or now[0] == "cancelled":  # removed or cancelled while it was read
            index.remove_file(stored.path)

    def _text_indexed(self, collection_id: str, file_id: str, chunks: int, usage: int) -> bool:
        """Note that the file's text is in (its chunk count), still ``in_progress``; False if it is no longer."""
        reg = self.registry
        with reg.lock, reg.db:
            return bool(reg.db.execute("UPDATE members SET chunks = ?, usage_bytes = ? WHERE collection_id = ? AND "
                                       "file_id = ? AND status = 'in_progress' RETURNING file_id",
                                       (chunks, usage, collection_id, file_id)).fetchall())

    def _finish(self, collection_id: str, file_id: str, status: str, code: str | None = None,
                message: str | None = None, chunks: int = 0, usage: int = 0) -> bool:
        reg = self.registry
        with reg.lock, reg.db:
            rows = reg.db.execute("UPDATE members SET status = ?, error_code = ?, error_message = ?, chunks = ?, "
                                  "usage_bytes = ? WHERE collection_id = ? AND file_id = ? AND status = 'in_progress' "
                                  "RETURNING file_id", (status, code, message, chunks, usage, collection_id, file_id))
            return bool(rows.fetchall())

    def close(self) -> None:
        """Stop the watcher and the worker and close every file; safe to call twice."""
        if self._watcher is not None:
            self._watcher.stop()
        with self._jobs:
            self._cancel.set()
            for _, stop in [item for queued in self._pending.values() for item in queued] + [*self._running.values()]:
                stop.set()
            workers = list(self._workers.values())
        deadline = time.monotonic() + 10
        for worker in workers:
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._jobs:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.close()
        with self._opening:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()
            if self._registry is not None:
                self._registry.close()
                self._registry = None


class _Pause:
    """``is_set`` (as a ``threading.Event``'s, which embedding checks between batches) while the collections
    close, the embedding's own work is stopped, or a file's text waits to be indexed in its collection."""

    def __init__(self, collections: Collections, collection_id: str, stop: threading.Event):
        self.collections, self.collection_id, self.stop = collections, collection_id, stop

    def is_set(self) -> bool:
        c = self.collections
        return c._cancel.is_set() or self.stop.is_set() or c._text_waiting(self.collection_id)
