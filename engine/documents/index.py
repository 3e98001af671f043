"""The document index: files read and chunked (``readers.py``, ``chunking.py``), their passages kept in
SQLite (``store.py``) with FTS5 for BM25 and sqlite-vec for vectors, and searched by both at once, the
two rankings' scores scaled and mixed (``VECTOR_WEIGHT``) and the top passages deduplicated.

The embedder is any callable from texts to vectors (``Embedder``; ``Embedder.from_engine`` wraps any
embedding-capable model an ``Engine`` or ``Runtime`` serves). With none, or before any passage has a
vector from the current one, search is BM25 alone and the result says so (``SearchResult.note``). A
different embedder than the one the vectors came from drops them; ``embed_missing`` embeds again.

Threading: every method may be called from any thread; one lock serializes use of the database, and
embedding (the slow part) runs outside it. ``cancel`` (a ``threading.Event``) is checked between
embedding batches; ``on_progress(done, total)`` is called at most about ten times a second.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DocumentRejected, FiresideError
from . import store
from .chunking import Chunk, chunk_document
from .document import Document
from .readers import read_document

log = logging.getLogger(__name__)

CANDIDATES = 50       # how deep each ranking is read before fusing
# Fusion: BM25 scores over the best one (0..1, 0 where it found nothing) and cosine similarities as they
# are, mixed with vectors weighing VECTOR_WEIGHT. Tuned on half of bench/retrieval.py's held-out questions
# (the other half never looked at): with 1,400-character passages, recall@5 0.87 -> 0.87 and MRR 0.67 ->
# 0.69 over reciprocal rank fusion (k 60), which ignores how far ahead the first candidate is. Scaling
# the cosines min-max over the candidates did as well there, but in a store of a few passages it turns
# a 0.01 lead in similarity into a full point; raw cosines keep their size.
VECTOR_WEIGHT = 0.5
EMBED_BATCH = 16
_STOPWORDS = frozenset("a an and are as at be by can do does for from how i in is it of on or that the this to "
                       "what when where which who why will with you your".split())


@dataclass(frozen=True)
class Embedder:
    """A named function from texts to vectors of one width; ``name`` says which model made them."""

    name: str
    embed: Callable[[list[str]], list[list[float]]]

    @classmethod
    def from_engine(cls, engine, model_id: str) -> Embedder:
        """Any model ``engine`` (an ``Engine`` or a ``Runtime``) can embed with, by id. A passage longer than
        the embedder's context is embedded from its start (dedicated embedders hold 512 tokens)."""
        return cls(model_id, lambda texts: engine.embed(model_id, texts, truncate=True)[0])


@dataclass(frozen=True)
class Hit:
    """A passage found: where it is (``path``, ``page``..``page_end``, ``heading``), its text, its fused
    ``score`` and its rank in each list (None where that list did not find it); ``status`` is ``ok``,
    ``changed`` (the file differs from what was indexed) or ``missing`` (it is gone)."""

    chunk_id: int
    path: str
    text: str
    heading: str
    page: int | None
    page_end: int | None
    score: float
    bm25_rank: int | None = None
    vector_rank: int | None = None
    status: str = "ok"


@dataclass
class SearchResult:
    hits: list[Hit]
    mode: str                     # "fused", "bm25" or "vectors"
    note: str = ""
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class IndexedFile:
    path: str
    kind: str
    chunks: int
    embedded: int
    pages: int | None
    unchanged: bool = False


class DocumentIndex:
    """One index file holding any number of documents."""

    def __init__(self, path: Path | str, embedder: Embedder | None = None):
        self._db = store.open_db(path)
        self._lock = threading.RLock()
        self.embedder: Embedder | None = None
        self.embed_error = ""  # why the last embedding stopped short, if it did
        self.use(embedder)

    def use(self, embedder: Embedder | None) -> None:
        """Embed with ``embedder`` from now on (None: BM25 alone). Vectors from another model are dropped,
        not compared with this one's; ``embed_missing`` makes the new ones."""
        with self._lock:
            self.embedder = embedder
            previous = store.meta(self._db, "embedder")
            if embedder is not None and previous is not None and previous != embedder.name:
                self._forget_vectors()

    # --- adding --------------------------------------------------------------------------------------
    def add_file(self, path: Path | str, *, cancel: threading.Event | None = None,
                 on_progress: Callable[[int, int], None] | None = None, embed: bool = True,
                 read: Callable[..., Document] = read_document) -> IndexedFile:
        """Read, chunk, index and (``embed``) embed the file at ``path``; a file already indexed with the same
        bytes is left as it is. Without ``embed`` its passages are found by keywords at once and get their
        vectors from ``embed_missing``. Raises ``DocumentRejected`` for a file that cannot be read. ``read``
        reads it (``read(path, cancel=cancel)``): in this process, or a ``ReaderProcess``'s ``read``."""
        try:
            path = Path(path).resolve()
            stat = path.stat()
        except (OSError, RuntimeError) as e:  # RuntimeError: a symlink loop (Python < 3.13)
            raise DocumentRejected(f"{Path(path).name} cannot be read: {getattr(e, 'strerror', None) or e}", "missing",
                                   str(path)) from e
        with self._lock:
            row = self._db.execute("SELECT id, size, mtime_ns, kind, pages FROM files WHERE path = ?",
                                   (str(path),)).fetchone()
            if row is not None and (row[1], row[2]) == (stat.st_size, stat.st_mtime_ns):
                count = self._db.execute("SELECT count(*) FROM chunks WHERE file_id = ?", (row[0],)).fetchone()[0]
                return IndexedFile(str(path), row[3], count, count, row[4], unchanged=True)
        doc = read(path, cancel=cancel)  # before hashing: a file over a cap is refused unread
        digest = _sha256(path)
        return self.add_document(doc, stat=stat, digest=digest, cancel=cancel, on_progress=on_progress, embed=embed)

    def add_document(self, doc: Document, *, stat: os.stat_result | None = None, digest: str = "",
                     cancel: threading.Event | None = None,
                     on_progress: Callable[[int, int], None] | None = None, embed: bool = True) -> IndexedFile:
        chunks = chunk_document(doc)
        ids = self._write(doc, chunks, stat, digest)
        embedded = self._embed(list(zip(ids, (c.indexed_text for c in chunks))), cancel, on_progress) if embed else 0
        return IndexedFile(doc.path, doc.kind, len(chunks), embedded, doc.pages)

    def _write(self, doc: Document, chunks: list[Chunk], stat, digest: str) -> list[int]:
        with self._lock, self._db:
            old = self._db.execute("SELECT id FROM files WHERE path = ?", (doc.path,)).fetchone()
            if old is not None:
                store.delete_file(self._db, old[0])
            self._db.execute("INSERT INTO files(path, kind, size, mtime_ns, sha256, pages, title, indexed_at) "
                             "VALUES(?,?,?,?,?,?,?,?)",
                             (doc.path, doc.kind, stat.st_size if stat else 0, stat.st_mtime_ns if stat else 0,
                              digest, doc.pages, doc.title, time.time()))
            file_id = self._db.last_insert_rowid()
            ids = []
            for c in chunks:
                self._db.execute("INSERT INTO chunks(file_id, ordinal, heading, text, page, page_end, digest) "
                                 "VALUES(?,?,?,?,?,?,?)", (file_id, c.ordinal, c.heading, c.text, c.page,
                                                           c.page_end, _text_digest(c.text)))
                ids.append(self._db.last_insert_rowid())
                self._db.execute("INSERT INTO chunks_fts(rowid, heading, body) VALUES(?,?,?)",
                                 (ids[-1], c.heading, c.text))
            return ids

    def remove_file(self, path: Path | str) -> bool:
        with self._lock, self._db:
            row = self._db.execute("SELECT id FROM files WHERE path = ?", (str(Path(path).resolve()),)).fetchone()
            if row is not None:
                store.delete_file(self._db, row[0])
            return row is not None

    def files(self) -> list[tuple[str, str, int]]:
        """(path, kind, chunk count) of every file indexed."""
        with self._lock:
            return list(self._db.execute("SELECT f.path, f.kind, count(c.id) FROM files f LEFT JOIN chunks c "
                                         "ON c.file_id = f.id GROUP BY f.id ORDER BY f.path"))

    # --- embedding -----------------------------------------------------------------------------------
    def embed_missing(self, *, cancel: threading.Event | None = None,
                      on_progress: Callable[[int, int], None] | None = None, path: Path | str | None = None) -> int:
        """Embed every passage (of the file at ``path``, else of every file) that has no vector from the
        current embedder (a file added without ``embed``, a change of embedder, an add cancelled mid-way);
        returns how many were embedded."""
        with self._lock:
            have = "SELECT rowid FROM chunk_vectors" if store.vectors_ready(self._db) else "SELECT NULL WHERE 0"
            todo = list(self._db.execute(
                f"SELECT c.id, c.heading, c.text FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id NOT IN "
                f"({have}) AND (?1 IS NULL OR f.path = ?1) ORDER BY c.id",
                (None if path is None else str(Path(path).resolve()),)))
        return self._embed([(i, f"{h}\n{t}" if h else t) for i, h, t in todo], cancel, on_progress)

    def missing_vectors(self) -> int:
        """How many passages have no vector from the current embedder (0 with none)."""
        with self._lock:
            if self.embedder is None:
                return 0
            have = "SELECT rowid FROM chunk_vectors" if store.vectors_ready(self._db) else "SELECT NULL WHERE 0"
            return self._db.execute(f"SELECT count(*) FROM chunks WHERE id NOT IN ({have})").fetchone()[0]

    def _embed(self, items: list[tuple[int, str]], cancel, on_progress) -> int:
        # One embedder for the whole run: ``use`` may change (or clear) it from another thread meanwhile,
        # and the run then stops at its next batch rather than store one model's vectors under another's name.
        embedder = self.embedder
        if embedder is None or not items:
            return 0
        done, last = 0, 0.0
        self.embed_error = ""
        for start in range(0, len(items), EMBED_BATCH):
            if (cancel is not None and cancel.is_set()) or self.embedder is not embedder:
                break
            batch = items[start:start + EMBED_BATCH]
            try:
                vectors = embedder.embed([text for _, text in batch])
            except FiresideError as e:  # the embedder is gone or failed: the passages stay findable by keywords
                log.warning("embedding with %s stopped after %d of %d passages: %s", embedder.name, done,
                            len(items), e)
                self.embed_error = f"{embedder.name} could not embed: {e}"
                break
            if not self._store_vectors([i for i, _ in batch], vectors, embedder):
                break  # another embedder was chosen while this batch was embedded
            done += len(batch)
            if on_progress is not None and (time.monotonic() - last > 0.1 or done == len(items)):
                last = time.monotonic()
                on_progress(done, len(items))
        return done

    def _store_vectors(self, ids: list[int], vectors: list[list[float]], embedder: Embedder) -> bool:
        with self._lock, self._db:
            if self.embedder is not embedder:
                return False
            if not store.vectors_ready(self._db):
                store.create_vectors(self._db, len(vectors[0]))
                store.set_meta(self._db, "embedder", embedder.name)
                store.set_meta(self._db, "embedder_width", str(len(vectors[0])))
            for chunk_id, vector in zip(ids, vectors):
                self._db.execute("INSERT OR REPLACE INTO chunk_vectors(rowid, embedding) VALUES(?, ?)",
                                 (chunk_id, store.packed(vector)))
        return True

    def _forget_vectors(self) -> None:
        with self._db:
            store.drop_vectors(self._db)
            store.set_meta(self._db, "embedder", None)
            store.set_meta(self._db, "embedder_width", None)

    # --- searching -----------------------------------------------------------------------------------
    def search(self, query: str, k: int = 5, mode: str = "auto") -> SearchResult:
        """The ``k`` passages that best answer ``query``. ``mode`` ``auto`` fuses BM25 and vectors when an
        embedder and vectors exist, else BM25 alone (``note`` says why); ``bm25`` and ``vectors`` force one."""
        timings: dict[str, float] = {}
        note = ""
        embedder = self.embedder  # one for the whole search: ``use`` may clear it from another thread
        vectors_usable = embedder is not None and self._vectors_from(embedder)
        if mode == "auto":
            mode = "fused" if vectors_usable else "bm25"
            if embedder is None:
                note = "No embedder is chosen: passages were found by keywords alone (BM25)."
            elif not vectors_usable:
                why = f"{self.embed_error}, so no" if self.embed_error else "No"
                note = f"{why} passage has a vector from {embedder.name} yet: passages were found by keywords alone (BM25)."
        elif mode in ("vectors", "fused") and not vectors_usable:
            raise ValueError(f"no vectors to search: embedder {embedder and embedder.name!r}")
        rankings = []
        if mode in ("bm25", "fused"):
            t = time.perf_counter()
            rankings.append(("bm25", 1.0 - VECTOR_WEIGHT if mode == "fused" else 1.0, self.bm25_scored(query, CANDIDATES)))
            timings["bm25"] = (time.perf_counter() - t) * 1000
        if mode in ("vectors", "fused"):
            t = time.perf_counter()
            rankings.append(("vectors", VECTOR_WEIGHT if mode == "fused" else 1.0,
                             self.vector_scored(query, CANDIDATES, embedder)))
            timings["vectors"] = (time.perf_counter() - t) * 1000
        return SearchResult(self._fused(rankings, k), mode, note, timings)

    def _vectors_from(self, embedder: Embedder) -> bool:
        with self._lock:
            return store.vectors_ready(self._db) and store.meta(self._db, "embedder") == embedder.name

    def bm25_ids(self, query: str, k: int) -> list[int]:
        return [i for i, _ in self.bm25_scored(query, k)]

    def bm25_scored(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` best passages by BM25 (headings count double), best first, with their scores (higher
        is better)."""
        terms = [t for t in re.findall(r"\w+", query.lower()) if t not in _STOPWORDS] or re.findall(r"\w+", query.lower())
        if not terms:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in dict.fromkeys(terms))
        with self._lock:
            return [(r[0], -r[1]) for r in self._db.execute(
                "SELECT rowid, bm25(chunks_fts, 2.0, 1.0) AS s FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?",
                (match, k))]

    def vector_ids(self, query: str, k: int, embedder: Embedder | None = None) -> list[int]:
        return [i for i, _ in self.vector_scored(query, k, embedder)]

    def vector_scored(self, query: str, k: int, embedder: Embedder | None = None) -> list[tuple[int, float]]:
        """The ``k`` nearest passages to the query's vector, nearest first, with their cosine similarity
        (1 - the table's cosine distance). ``embedder``: the one a search started with (``use`` may change
        the index's meanwhile)."""
        [vector] = (embedder or self.embedder).embed([query])
        with self._lock:
            return [(r[0], 1.0 - r[1]) for r in self._db.execute(
                "SELECT rowid, distance FROM chunk_vectors WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                (store.packed(vector), k))]

    def _fused(self, rankings: list[tuple[str, float, list[tuple[int, float]]]], k: int) -> list[Hit]:
        """The top ``k`` of the rankings mixed: BM25's scores over its best, cosines as they are, weighted and
        summed (a passage a ranking did not find adds 0 from it); ties keep the better rank."""
        scores: dict[int, float] = {}
        ranks: dict[int, dict[str, int]] = {}
        for name, weight, scored in rankings:
            best = max((s for _, s in scored), default=0.0)
            for rank, (chunk_id, score) in enumerate(scored, 1):
                scaled = (score / best if best > 0 else 1.0) if name == "bm25" else score
                scores[chunk_id] = scores.get(chunk_id, 0.0) + weight * scaled
                ranks.setdefault(chunk_id, {})[name] = rank
        hits, seen = [], set()
        order = sorted(scores, key=lambda c: (-scores[c], min(ranks[c].values())))
        for chunk_id in order:
            hit = self._hit(chunk_id, scores[chunk_id], ranks[chunk_id])
            if hit is None:
                continue
            key = _text_digest(hit.text)
            if key in seen:  # the same passage in two files (a copy, a quoted section): shown once
                continue
            seen.add(key)
            hits.append(hit)
            if len(hits) == k:
                break
        return hits

    def _hit(self, chunk_id: int, score: float, ranks: dict[str, int]) -> Hit | None:
        with self._lock:
            row = self._db.execute("SELECT f.path, c.text, c.heading, c.page, c.page_end, f.size, f.mtime_ns "
                                   "FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id = ?",
                                   (chunk_id,)).fetchone()
        if row is None:
            return None
        path, text, heading, page, page_end, size, mtime_ns = row
        return Hit(chunk_id, path, text, heading, page, page_end, score, ranks.get("bm25"), ranks.get("vectors"),
                   _status(path, size, mtime_ns))

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _status(path: str, size: int, mtime_ns: int) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return "ok" if (st.st_size, st.st_mtime_ns) == (size, mtime_ns) or mtime_ns == 0 else "changed"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _text_digest(text: str) -> str:
    return hashlib.sha1(" ".join(text.lower().split()).encode()).hexdigest()
