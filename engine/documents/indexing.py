"""Indexing the knowledge collections' files in the background (the collections themselves:
``collections.py``).

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

Threading: ``Indexer``'s public methods may be called from any thread; the work runs on each collection's
worker. ``close`` stops the workers (within one embedding batch).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass

from ..errors import DocumentNotFound, DocumentRejected
from .index import DocumentIndex, Embedder
from .pdf import Cancelled
from .reader_process import ReaderProcess
from .registry import Registry

log = logging.getLogger(__name__)
# a refusal's error code by its reason; any other is ``invalid_file``
_CODES = {"unsupported": "unsupported_file", "binary": "unsupported_file", "reader_died": "server_error"}
MAX_TRIES = 2  # processes that may die reading one file before it is failed instead of read again


EMBEDDING_AT_ONCE = 2  # embedder calls in flight from every collection's worker (and searches) together
_embedding = threading.BoundedSemaphore(EMBEDDING_AT_ONCE)


def gated(embedder: Embedder | None) -> Embedder | None:
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


@dataclass(frozen=True)
class Embedding:
    """The background embedding after a change of embedder (or of passages still without vectors): which
    model, how many passages of how many have their vectors, and why it stopped short (``error``)."""

    embedder: str
    done: int
    total: int
    error: str = ""


class Indexer:
    """Each collection's worker and its queue, for ``collections`` (a ``Collections``: its registry, uploads,
    members and indexes), and how far the background embedding has got."""

    def __init__(self, collections):
        self.collections = collections
        # collection -> (file to index, or None: passages to embed; its stop event), queued and running
        self._pending: dict[str, deque[tuple[str | None, threading.Event]]] = {}
        self._running: dict[str, tuple[str | None, threading.Event]] = {}
        self._workers: dict[str, threading.Thread] = {}  # collection -> its worker, while it has work
        self._spare: ReaderProcess | None = None  # a reader process kept from a worker that ended, for the next
        self._jobs = threading.Lock()  # guards the four above
        self._cancel = threading.Event()
        self._progress: dict[str, tuple[int, int]] = {}  # collection id -> (embedded, to embed) this run
        self._embed_error = ""
        self._progress_lock = threading.Lock()

    # --- the queue ---------------------------------------------------------------------------------
    def resume(self, reg: Registry) -> None:
        """Queue the files left ``in_progress`` when the process stopped, to index again; one whose reading was
        begun ``MAX_TRIES`` times and never ended (the process died each time) fails instead."""
        with reg.lock, reg.db:
            reg.db.execute("DELETE FROM reading WHERE NOT EXISTS (SELECT 1 FROM members m WHERE m.collection_id = "
                           "reading.collection_id AND m.file_id = reading.file_id AND m.status = 'in_progress')")
            reg.db.execute("UPDATE members SET status = 'failed', error_code = 'server_error', error_message = ? "
                           "WHERE status = 'in_progress' AND EXISTS (SELECT 1 FROM reading r WHERE r.collection_id = "
                           "members.collection_id AND r.file_id = members.file_id AND r.tries >= ?)",
                           (f"indexing it stopped the process {MAX_TRIES} times; remove the file and add it again "
                            "to try once more", MAX_TRIES))
            resumable = reg.db.execute("SELECT collection_id, file_id FROM members WHERE status = 'in_progress' "
                                       "ORDER BY created_at").fetchall()
        for item in resumable:
            self.enqueue(*item)

    def enqueue(self, collection_id: str, file_id: str | None) -> None:
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

    def stop(self, collection_id: str, file_id: str | None = None, every: bool = False) -> None:
        """Stop the work queued or running for one file of the collection (``every``: all its work)."""
        with self._jobs:
            items = [*self._pending.get(collection_id, ()), *([self._running[collection_id]]
                                                                if collection_id in self._running else [])]
        for item, stop in items:
            if every or item == file_id:
                stop.set()

    def wait(self, collection_id: str, timeout: float) -> None:
        """Wait for the collection's worker to end, unless this is that worker."""
        with self._jobs:
            worker = self._workers.get(collection_id)
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout=timeout)

    def close(self) -> None:
        """Stop every worker's work, wait for them (10 s in all) and close the spare reader process."""
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

    # --- the embedding's progress ------------------------------------------------------------------
    def restart_progress(self) -> None:
        """Forget the embedding's progress and error (a new embedder is chosen)."""
        with self._progress_lock:
            self._progress, self._embed_error = {}, ""

    def queue_embedding(self, collection_id: str, missing: int) -> None:
        """Queue the collection's passages to embed, ``missing`` of them without vectors (counted in
        ``progress``)."""
        if missing:
            with self._progress_lock:
                self._progress[collection_id] = (0, missing)
        self.enqueue(collection_id, None)

    def progress(self, embedder: Embedder | None) -> Embedding | None:
        """The background embedding by ``embedder`` under way, or None once every passage has its vector (or
        with no embedder); a run that stopped short stays, with its ``error``, until the embedder changes."""
        with self._progress_lock:
            if embedder is None or not self._progress:
                return None
            done = sum(d for d, _ in self._progress.values())
            total = sum(t for _, t in self._progress.values())
            if done >= total and not self._embed_error:
                return None
            return Embedding(embedder.name, done, total, self._embed_error)

    # --- on each collection's worker thread --------------------------------------------------------
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
        c = self.collections
        try:
            waiting = [m for m in c.members(collection_id, status="in_progress") if m.chunks]
        except DocumentNotFound:
            return  # deleted while it waited
        index, pause = c._index(collection_id), _Pause(self, collection_id, stop)
        embedder, total, before = index.embedder, index.missing_vectors(), 0

        def on_progress(done: int, _of: int) -> None:  # over the whole run: the files one after another
            with self._progress_lock:
                if c.embedder is embedder:  # not a run the user has changed their mind about
                    self._progress[collection_id] = (before + done, max(total, before + done))

        if total:
            on_progress(0, total)
        embedded = 0
        for member in waiting:
            try:
                path = c.uploads.get(member.file_id).path
            except DocumentNotFound:
                continue  # removed while it waited
            n = index.embed_missing(cancel=pause, path=path, on_progress=on_progress)
            embedded, before = embedded + n, before + n
            if pause.is_set():  # stopped, closing, or a file added meanwhile is read first (then the vectors go on)
                if not self._cancel.is_set() and not stop.is_set():
                    self.enqueue(collection_id, None)
                return
            # done (an embedder that failed leaves the file to keywords, and completed too)
            self._finish(collection_id, member.file_id, "completed", chunks=member.chunks, usage=member.usage_bytes)
        embedded += index.embed_missing(cancel=pause, on_progress=on_progress)
        if index.embed_error and c.embedder is embedder:
            with self._progress_lock:
                self._embed_error = index.embed_error
        if embedded:
            log.info("embedded %d passages of %s", embedded, collection_id)

    def _text_waiting(self, collection_id: str) -> bool:
        with self._jobs:
            return any(f is not None for f, _ in self._pending.get(collection_id, ()))

    def _index_one(self, collection_id: str, file_id: str, stop: threading.Event, reader: ReaderProcess) -> None:
        c = self.collections
        try:
            member = c.member(collection_id, file_id)
            stored = c.uploads.get(file_id)
        except DocumentNotFound:
            return  # removed while it waited
        if member.status != "in_progress":
            return
        index = c._index(collection_id)
        self._reading(collection_id, file_id, True)
        try:
            self._read(index, member, stored, stop, reader)
        finally:  # ended here, one way or another: only a process that died leaves the row (``resume``)
            self._reading(collection_id, file_id, False)

    def _reading(self, collection_id: str, file_id: str, begun: bool) -> None:
        reg = self.collections.registry
        with reg.lock, reg.db:
            if begun:
                reg.db.execute("INSERT INTO reading VALUES(?, ?, 1) ON CONFLICT DO UPDATE SET tries = tries + 1",
                               (collection_id, file_id))
            else:
                reg.db.execute("DELETE FROM reading WHERE collection_id = ? AND file_id = ?", (collection_id, file_id))

    def _read(self, index: DocumentIndex, member, stored, stop: threading.Event, reader: ReaderProcess) -> None:
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
        if self.collections.embedder is not None:  # searchable by keywords now, completed when its vectors are made
            if self._text_indexed(collection_id, file_id, done.chunks, stored.bytes):
                self.enqueue(collection_id, None)
                return
        elif self._finish(collection_id, file_id, "completed", chunks=done.chunks, usage=stored.bytes):
            return
        c = self.collections
        with c.registry.lock:
            now = c.registry.db.execute("SELECT status FROM members WHERE collection_id = ? AND file_id = ?",
                                        (collection_id, file_id)).fetchone()
        if now is None or now[0] == "cancelled":  # removed or cancelled while it was read
            index.remove_file(stored.path)

    def _text_indexed(self, collection_id: str, file_id: str, chunks: int, usage: int) -> bool:
        """Note that the file's text is in (its chunk count), still ``in_progress``; False if it is no longer."""
        reg = self.collections.registry
        with reg.lock, reg.db:
            return bool(reg.db.execute("UPDATE members SET chunks = ?, usage_bytes = ? WHERE collection_id = ? AND "
                                       "file_id = ? AND status = 'in_progress' RETURNING file_id",
                                       (chunks, usage, collection_id, file_id)).fetchall())

    def _finish(self, collection_id: str, file_id: str, status: str, code: str | None = None,
                message: str | None = None, chunks: int = 0, usage: int = 0) -> bool:
        reg = self.collections.registry
        with reg.lock, reg.db:
            rows = reg.db.execute("UPDATE members SET status = ?, error_code = ?, error_message = ?, chunks = ?, "
                                  "usage_bytes = ? WHERE collection_id = ? AND file_id = ? AND status = 'in_progress' "
                                  "RETURNING file_id", (status, code, message, chunks, usage, collection_id, file_id))
            return bool(rows.fetchall())


class _Pause:
    """``is_set`` (as a ``threading.Event``'s, which embedding checks between batches) while the collections
    close, the embedding's own work is stopped, or a file's text waits to be indexed in its collection."""

    def __init__(self, indexer: Indexer, collection_id: str, stop: threading.Event):
        self.indexer, self.collection_id, self.stop = indexer, collection_id, stop

    def is_set(self) -> bool:
        i = self.indexer
        return i._cancel.is_set() or self.stop.is_set() or i._text_waiting(self.collection_id)
