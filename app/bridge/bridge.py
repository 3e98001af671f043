"""The one road from the GUI to the engine, and from engine threads back to the GUI thread.

Like Anki's ``taskman``: every engine call a page makes goes through ``EngineBridge``, which runs it on
the task pool (``tasks.py``) and brings the outcome back on the GUI thread, as a signal or an
``on_done(result, error)`` callback. Nothing that waits runs on the GUI thread: not a load or a reply,
not the keyring (the Hugging Face token, remote keys, the API key), not a walk of a models folder, not
a network call. Long-lived activity has a controller of its own, owned here: ``downloads``
(``downloading.py``: the hub and its pulls), ``server`` (``serving.py``: the API server), ``devices`` (``devices.py``: sharing on
the local network, finding and pairing devices),
``prompt_cache`` (``prompt_cache.py``: the saved KV states), ``embedder`` (``embedding.py``: the model that
embeds documents, and the app's knowledge collections), ``knowledge`` (``knowledge.py``: those collections
listed, made from files or watched folders, rescanned, deleted) and ``images`` (``attachments.py``: chat
images, checked, saved, and decoded for a reply on its worker). Its one-shot calls (the model library,
this machine, the Hugging Face token, remote engines) are ``calls.py``'s ``EngineCalls``, which it inherits.
The tools (``tools.py``), the loader (``loader.py``) and the task pool (``tasks.py``) sit beside it in this
package, and ``__init__`` names
the engine's pure helpers and constants the windows may use: the one door from the app to the engine.

Streamed text is batched on the worker side by a ``TextBatcher`` (one signal per ``BATCH_S`` at most,
for the bridge's replies and the tool runs alike), and load progress is
sampled at about ten updates a second, so the GUI thread never sees more than a handful of events per
tick. Every cross-thread signal is connected to a bound ``@Slot`` of a GUI-thread object, so Qt queues
it onto the main thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from fireside.engine.types import ChatRequest, Chunk, LoadProgress

from .attachments import ChatImages
from .calls import EngineCalls
from .chatdocs import ChatDocuments
from .devices import DevicesController
from .downloading import DownloadsController
from .embedding import EmbedderController
from .knowledge import KnowledgeController
from .prompt_cache import PromptCacheController
from .serving import ServerController
from .tasks import Tasks

log = logging.getLogger(__name__)

BATCH_S = 0.06  # streamed text reaches the GUI at most ~16 times a second
PROGRESS_S = 0.1

__all__ = ["BATCH_S", "EngineBridge", "TextBatcher"]


class TextBatcher:
    """Streamed text gathered by kind (``text``, ``reasoning``) on the thread that streams it, and
    handed to ``emit(kind, text)`` at most once per ``BATCH_S``; ``flush`` sends what is left. The
    bridge's replies and the tool runs (``tools.py``) both stream through one of these."""

    def __init__(self, emit: Callable[[str, str], None]):
        self._emit = emit
        self._pending: dict[str, list[str]] = {}
        self._last = 0.0

    def add(self, chunk: Chunk) -> None:
        if chunk.kind in ("text", "reasoning") and chunk.text:
            self._pending.setdefault(chunk.kind, []).append(chunk.text)
        if self._pending and time.monotonic() - self._last >= BATCH_S:
            self.flush()

    def flush(self) -> None:
        self._last = time.monotonic()
        for kind, parts in self._pending.items():
            self._emit(kind, "".join(parts))
        self._pending.clear()


class EngineBridge(EngineCalls, QObject):
    """The engine, as signals and background calls (the one-shot ones are ``calls.py``'s). One per app; lives
    on the GUI thread.

    Signals:
        load_progress(str, float): model id, fraction loaded (sampled, ~10 a second).
        load_finished(str, object): model id, its ``LoadedModel``.
        load_failed(str, object): model id, the exception (``LoadCancelled`` when the user cancelled).
        loaded_changed(): the set of loaded models changed (loaded, unloaded, crashed).
        reply_text(int, str, str): reply id, chunk kind (``text`` or ``reasoning``), batched text.
        reply_finished(int, object): reply id, the final ``Chunk`` (finish_reason and usage).
        reply_failed(int, object): reply id, the exception.
        reply_sources(int, object): reply id, the sources its documents gave it (``{"items", "note"}``),
            before its first text.
        reply_prompt(int, int): reply id, the tokens its prompt takes of the context, counted beside the
            reply (at once when the model is loaded, else by its first text), for the context meter.
        unload_failed(str, object): model id, the exception stopping its runner raised.
    """

    load_progress = Signal(str, float)
    load_finished = Signal(str, object)
    load_failed = Signal(str, object)
    loaded_changed = Signal()
    reply_text = Signal(int, str, str)
    reply_finished = Signal(int, object)
    reply_failed = Signal(int, object)
    reply_sources = Signal(int, object)
    reply_prompt = Signal(int, int)
    unload_failed = Signal(str, object)

    def __init__(self, engine, tasks: Tasks, extras: dict[str, Any] | None = None, parent: QObject | None = None):
        super().__init__(parent)
        self.engine = engine
        self.tasks = tasks
        settings = getattr(engine, "settings", None)
        self.downloads = DownloadsController(settings, tasks, extras if extras is not None else {}, self)
        self.server = ServerController(engine, settings, tasks, self)
        self.devices = DevicesController(engine, settings, tasks, self)
        self.prompt_cache = PromptCacheController(engine, settings, tasks)
        self.embedder = EmbedderController(engine, settings, tasks)
        self.server.collections = self.embedder.collections  # the vector stores the app's server serves
        self.images = ChatImages(engine, settings.data_dir / "images" if settings else Path("images"), tasks)
        self.documents = ChatDocuments(engine, settings.data_dir / "documents" if settings else Path("documents"), tasks)
        self.embedder.followers.append(self.documents.use_embedder)  # a chat's documents embed with the choice
        self.knowledge = KnowledgeController(self.embedder.collections, tasks)
        self.documents.knowledge = self.knowledge  # a chat's ticked collections ground its replies
        if settings is not None:  # the choice is a file in the config folder: read on the pool
            tasks.run_in_background(lambda: self.documents.use_embedder(self.embedder.chosen()))
        self._cancels: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    # --- loading ---------------------------------------------------------------------------------
    def load(self, model_id: str, options=None) -> threading.Event:
        """Load ``model_id`` on a worker; returns the event that cancels the load."""
        cancel = self._track(f"load:{model_id}")
        self.tasks.run_in_background(lambda: self._load(model_id, options, cancel))
        return cancel

    def _load(self, model_id: str, options, cancel: threading.Event) -> None:
        last = [0.0]

        def on_progress(p: LoadProgress) -> None:
            now = time.monotonic()
            if p.fraction >= 1.0 or now - last[0] >= PROGRESS_S:
                last[0] = now
                self.load_progress.emit(model_id, float(p.fraction))

        try:
            loaded = self.engine.load(model_id, options, on_progress=on_progress, cancel=cancel)
        except Exception as exc:
            self.load_failed.emit(model_id, exc)
        else:
            self.load_finished.emit(model_id, loaded)
        finally:
            self._untrack(f"load:{model_id}")
            self.loaded_changed.emit()

    def cancel_load(self, model_id: str) -> None:
        self._cancel(f"load:{model_id}")

    def unload(self, model_id: str) -> None:
        """Free the model's memory on a worker; ``unload_failed`` says if stopping its runner failed."""
        self.tasks.run_in_background(lambda: self._unload(model_id))

    def _unload(self, model_id: str) -> bool:
        try:
            return self.engine.unload(model_id)
        except Exception as exc:  # the runner may already be gone: say so, and still refresh the lists
            log.warning("unloading %s failed: %s", model_id, exc)
            self.unload_failed.emit(model_id, exc)
            return False
        finally:
            self.loaded_changed.emit()

    # --- chatting --------------------------------------------------------------------------------
    def chat(self, reply_id: int, model_id: str, request: ChatRequest, chat_id: int | None = None,
             collections: list[str] = ()) -> threading.Event:
        """Stream a reply on a worker; returns the event that stops it (the Stop button sets it). A request
        whose messages carry documents, or whose chat ticked knowledge ``collections``, is grounded in them
        first (``chatdocs.py``, in chat ``chat_id``'s index) and ``reply_sources`` says which passages it was
        given."""
        cancel = self._track(f"reply:{reply_id}")
        self.tasks.run_in_background(lambda: self._chat(reply_id, model_id, request, cancel, chat_id, collections))
        return cancel

    def _chat(self, reply_id: int, model_id: str, request: ChatRequest, cancel: threading.Event,
              chat_id: int | None = None, collections: list[str] = ()) -> None:
        was_loaded = self.engine.is_loaded(model_id)
        try:
            if getattr(request, "messages", None) and (collections or self.documents.wanted(request.messages)):
                request.messages, sources = self.documents.ground(chat_id, model_id, request.messages,
                                                                  request.sampling.max_tokens, cancel, collections)
                self.reply_sources.emit(reply_id, sources)
            if getattr(request, "messages", None):  # saved images, decoded (once)
                request.messages = self.images.resolve(request.messages)
            count = partial(self._count_prompt, reply_id, model_id, request)
            if loaded := self.engine.is_loaded(model_id):
                count()  # at once; else by the first text, once the load is done
            done = self._stream(reply_id, self.engine.chat(model_id, request, cancel=cancel), None if loaded else count)
        except Exception as exc:
            self.reply_failed.emit(reply_id, exc)
        else:
            self.reply_finished.emit(reply_id, done)
        finally:
            self._untrack(f"reply:{reply_id}")
            if not was_loaded or not self.engine.is_loaded(model_id):
                self.loaded_changed.emit()

    def _count_prompt(self, reply_id: int, model_id: str, request: ChatRequest) -> None:
        """Count the prompt's tokens on another worker, so the reply's first token waits for nothing (the
        runner tokenizes on a thread of its own), and say it with ``reply_prompt``. Only for a local model
        that is loaded: a count must never load one (nor ask a remote)."""
        def count() -> int | None:
            if self.engine.is_remote(model_id) or not self.engine.is_loaded(model_id):
                return None
            return self.engine.count_chat_tokens(model_id, request)

        def said(tokens: int | None, error) -> None:
            if error is None and tokens:  # a failed count only leaves the meter as it was
                self.reply_prompt.emit(reply_id, tokens)

        self.tasks.run_in_background(count, said)

    def _stream(self, reply_id: int, chunks, first: Callable[[], Any] | None = None) -> Chunk:
        """Pass ``chunks`` on as batched text; ``first`` is called at the first chunk."""
        batcher = TextBatcher(lambda kind, text: self.reply_text.emit(reply_id, kind, text))
        try:
            for chunk in chunks:
                if first is not None:
                    first, call = None, first
                    call()
                if chunk.kind == "done":
                    return chunk
                batcher.add(chunk)
        finally:  # a stream that fails (a device gone mid-reply) still delivers the text it brought
            batcher.flush()
        return Chunk("done", finish_reason="stop")

    def stop(self, reply_id: int) -> None:
        self._cancel(f"reply:{reply_id}")

    def forget_chat(self, conv_id: int) -> None:
        """A chat was deleted: delete its saved states in the prompt cache."""
        self.prompt_cache.forget_chat(conv_id)

    # --- bookkeeping -----------------------------------------------------------------------------
    def _track(self, key: str) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._cancels[key] = event
        return event

    def _cancel(self, key: str) -> None:
        with self._lock:
            event = self._cancels.get(key)
        if event:
            event.set()

    def _untrack(self, key: str) -> None:
        with self._lock:
            self._cancels.pop(key, None)

    def cancel_all(self) -> None:
        """Set every cancel event: stops every load and reply in flight (used at shutdown)."""
        with self._lock:
            events = list(self._cancels.values())
        for event in events:
            event.set()

    def close(self) -> None:
        """Set every cancel event and pause every download (used at shutdown, before the pool stops)."""
        self.cancel_all()
        self.downloads.shutdown()
        self.devices.close()
        self.embedder.close()
