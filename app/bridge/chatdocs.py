"""Documents in chats: attached and read off the GUI thread, kept on disk by their content, and read again
when a reply is asked for.

A document the user attaches (the composer's button, a drop or a paste of a file: the road images take)
is read here by the engine's readers (``engine/documents``: an encrypted or corrupt PDF, binary data
under a text name, a file over a cap is refused with ``DocumentRejected``, in words), then copied once to
``data_dir/documents/<sha256 of the bytes>.<ext>``, so a later turn, or a restart, still reads it even
if the original moves. A message names its documents (``store.py``'s ``message_documents``); the chat
session sends them as ``saved_document`` parts and ``ground`` turns those into text on the worker that
runs the reply, through the ``Grounder`` (``grounder.py``): a document that fits the context budget goes in
whole, a longer one is indexed in the chat's own index (``data_dir/documents/chats/<chat id>.sqlite``) and
the passages that best match the question go with it, as the reply's numbered sources. ``sweep`` deletes the
saved documents and the chats' indexes that no chat names any more.

Threading: ``attach`` and ``context`` run on the task pool and answer on the GUI thread; ``ground``
blocks (the disk, the tokenizer) and is called on the reply's worker.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fireside.engine.documents import Document, chunk_document, read_document, reader_for
from fireside.engine.errors import DocumentRejected
from fireside.engine.fsutil import fsync_dir

from .grounder import SAVED_DOCUMENT, Grounder
from .tasks import OnDone, Tasks

log = logging.getLogger(__name__)

KEPT_DOCUMENTS = 8  # documents kept read in memory for the next turns
PROGRESS_S = 0.1  # a PDF's reading progress reaches the chip at most ten times a second


class AttachCancelled(Exception):
    """The user took the document off while it was being read."""


@dataclass(frozen=True)
class DocumentAttachment:
    """A document read and saved, waiting in the composer: ``name`` is its file in the documents folder."""

    name: str
    label: str  # its file name, for the user
    kind: str  # the reader that read it: pdf, docx, html, markdown, text, code
    pages: int | None
    chars: int

    def part(self) -> dict[str, Any]:
        return {"type": SAVED_DOCUMENT, "name": self.name, "file": self.label, "pages": self.pages}

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "file": self.label, "kind": self.kind, "pages": self.pages}


def document_part(doc: dict[str, Any]) -> dict[str, Any]:
    """The content part for a document a message names (its ``store`` dict)."""
    return {"type": SAVED_DOCUMENT, "name": doc["name"], "file": doc.get("file", ""), "pages": doc.get("pages")}


class ChatDocuments:
    """The documents folder, the chats' indexes and the documents read; owned by the ``EngineBridge``
    (``bridge.documents``). ``embedder_model``: the model id that embeds passages, or None (BM25 alone)."""

    def __init__(self, engine, folder: Path, tasks: Tasks, embedder_model: str | None = None):
        self.engine, self.folder, self.tasks = engine, Path(folder), tasks
        self.embedder_model = embedder_model
        self.knowledge = None  # the bridge's KnowledgeController: the collections a chat may tick
        self._read: OrderedDict[str, Document] = OrderedDict()
        self._lock = threading.Lock()
        self._grounder = Grounder(self)

    def use_embedder(self, model_id: str | None) -> None:
        """Embed with ``model_id`` from the next question on (None: BM25 alone); any thread."""
        self.embedder_model = model_id

    @staticmethod
    def accepts(path: Path | str) -> bool:
        """Whether ``path`` names a kind of document Fireside reads (by its suffix; nothing is read)."""
        return Path(path).suffix != "" and reader_for(Path(path)) is not None

    def path(self, name: str) -> Path:
        if Path(name).name != name or name.startswith("."):  # a name from the database is a bare file name
            raise DocumentRejected(f"{name!r} is not the name of a saved document", "missing")
        return self.folder / name

    # --- attaching -------------------------------------------------------------------------------
    def attach(self, path: Path, on_done: OnDone, label: str | None = None,
               on_progress: Callable[[int, int], None] | None = None) -> threading.Event:
        """Read and save the document at ``path`` on a worker; ``on_done(DocumentAttachment, error)``.
        ``label`` names it for the user (its file name by default: a saved copy passes the original's);
        ``on_progress(page, pages)`` is called on the GUI thread as a PDF is read (about ten times a second).
        Returns the event that cancels it: a PDF stops before its next page, and the result is dropped
        (``AttachCancelled``)."""
        cancel = threading.Event()
        last = [0.0]

        def on_page(number: int, count: int) -> None:
            if cancel.is_set():
                raise AttachCancelled(Path(path).name)
            if on_progress is not None and (time.monotonic() - last[0] >= PROGRESS_S or number == count):
                last[0] = time.monotonic()
                self.tasks.run_on_main(lambda: on_progress(number, count))

        self.tasks.run_in_background(lambda: self._attach(Path(path), cancel, label, on_page), on_done)
        return cancel

    def _attach(self, path: Path, cancel: threading.Event, label: str | None = None,
                on_page: Callable[[int, int], None] | None = None) -> DocumentAttachment:
        try:
            doc = read_document(path, on_page)
        except AttachCancelled:
            raise
        except DocumentRejected as exc:
            text = str(exc) if str(exc).startswith(path.name) else f"{path.name}: {exc}"
            raise DocumentRejected(f"Not attached: {text}", exc.reason, str(path)) from None
        except Exception as exc:  # noqa: BLE001 - a reader's library failing in a way nobody foresaw
            log.warning("reading %s failed", path, exc_info=exc)
            raise DocumentRejected(f"Not attached: {path.name} cannot be read ({type(exc).__name__}: {exc})",
                                   "corrupt", str(path)) from None
        if cancel.is_set():
            raise AttachCancelled(path.name)
        if not doc.text.strip():
            raise DocumentRejected(f"Not attached: {path.name} holds no text", "corrupt", str(path))
        try:
            name = self._save(path, cancel)
        except OSError as exc:
            raise DocumentRejected(f"Not attached: {path.name} could not be saved in {self.folder}: "
                                   f"{exc.strerror or exc}", "missing", str(path)) from None
        doc.path = str(self.path(name))
        with self._lock:
            self._keep(name, doc)
        return DocumentAttachment(name, label or path.name, doc.kind, doc.pages, len(doc.text))

    def _save(self, path: Path, cancel: threading.Event) -> str:
        """Copy ``path`` into the documents folder under the hash of its bytes, durably; returns its name."""
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                digest.update(block)
        name = f"{digest.hexdigest()}{path.suffix.lower()}"
        dest = self.path(name)
        if dest.exists():
            os.utime(dest)
            return name
        self.folder.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(f".{name}.{threading.get_ident()}.part")  # two attaching one file each write their own
        with open(path, "rb") as src, open(part, "wb") as out:
            while block := src.read(1 << 20):
                if cancel.is_set():
                    break
                out.write(block)
            out.flush()
            os.fsync(out.fileno())
        if cancel.is_set():
            part.unlink(missing_ok=True)
            raise AttachCancelled(path.name)
        os.replace(part, dest)
        fsync_dir(self.folder)
        return name

    # --- reading what was saved ------------------------------------------------------------------
    def document(self, name: str) -> Document:
        with self._lock:
            if name in self._read:
                self._read.move_to_end(name)
                return self._read[name]
        path = self.path(name)
        if not path.is_file():
            raise DocumentRejected(f"a document of this chat ({name}) is missing from {self.folder}", "missing")
        doc = read_document(path)
        with self._lock:
            self._keep(name, doc)
        return doc

    def _keep(self, name: str, doc: Document) -> None:
        self._read[name] = doc
        self._read.move_to_end(name)
        while len(self._read) > KEPT_DOCUMENTS:
            self._read.popitem(last=False)

    def context(self, source: dict, on_done: OnDone) -> None:
        """A source in its context, on a worker: ``(before, passage, after)``, the passages around it in
        its document (empty where there are none), or an error when its saved file is gone."""
        def work():
            if source.get("file_id") and self.knowledge is not None:  # a passage of a knowledge collection
                doc = read_document(self.knowledge.path(source["file_id"]))
            else:
                doc = self.document(source["name"])
            chunks = chunk_document(doc)
            i = next((c.ordinal for c in chunks if c.ordinal == source.get("ordinal") and c.text == source["text"]),
                     next((c.ordinal for c in chunks if c.text == source["text"]), None))
            if i is None:
                return "", source["text"], ""
            return (chunks[i - 1].text if i > 0 else "", chunks[i].text,
                    chunks[i + 1].text if i + 1 < len(chunks) else "")
        self.tasks.run_in_background(work, on_done)

    # --- tidying ---------------------------------------------------------------------------------
    def sweep_later(self, referenced: set[str], chats: set[int], on_done: OnDone | None = None) -> None:
        """``sweep`` on the pool, for the files written before now (start-up calls it once)."""
        now = time.time()
        self.tasks.run_in_background(lambda: self.sweep(referenced, chats, now), on_done)

    def sweep(self, referenced: set[str], chats: set[int], before: float) -> list[str]:
        """Delete the saved documents no message names and the indexes of chats that are gone, written
        before ``before`` (a document waiting in the composer is newer); returns the names deleted."""
        gone = []
        for path in sorted(self.folder.glob("*.*")) if self.folder.is_dir() else []:
            if path.is_file() and path.name not in referenced and path.stat().st_mtime < before:
                path.unlink(missing_ok=True)  # (a .part left by a crash goes too)
                gone.append(path.name)
        indexes = self.folder / "chats"
        for path in sorted(indexes.glob("*.sqlite*")) if indexes.is_dir() else []:
            chat = path.name.split(".")[0]
            if not (chat.isdigit() and int(chat) in chats) and path.stat().st_mtime < before:
                path.unlink(missing_ok=True)
                gone.append(f"chats/{path.name}")
        if gone:
            log.info("deleted %d saved document(s) and index(es) no chat refers to any more", len(gone))
        return gone

    # --- replying (on the reply's worker: grounder.py) ------------------------------------------
    @staticmethod
    def wanted(messages: list[dict[str, Any]]) -> bool:
        return Grounder.wanted(messages)

    def ground(self, chat_id: int | None, model_id: str, messages: list[dict[str, Any]], max_tokens: int | None,
               cancel: threading.Event | None = None, collections: list[str] = ()
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``messages`` with their documents as text, and the reply's sources ``{"items": [...], "note": str}``;
        ``collections``: the knowledge collections the chat ticked (see ``Grounder.ground``)."""
        return self._grounder.ground(chat_id, model_id, messages, max_tokens, cancel, collections)
