"""The one road from engine threads to the GUI thread, in the manner of Anki's ``taskman``.

``Tasks.run_in_background(fn, on_done)`` runs ``fn`` on a small thread pool and calls ``on_done(result,
error)`` on the GUI thread; ``Tasks.run_on_main(closure)`` schedules a closure on the GUI thread through
one private signal of a QObject that lives there. Long-lived engine state (model loads, streamed
replies, the set of loaded models) goes through ``EngineBridge``, which turns the runtime's blocking
generators and callbacks into Qt signals. Streamed text is batched on the worker side (one signal per
``BATCH_S`` at most), and load progress is sampled at about ten updates a second, so the GUI thread
never sees more than a handful of events per tick. Every cross-thread signal is connected to a bound
``@Slot`` of a GUI-thread object, so Qt queues it onto the main thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from fireside.engine.runtime.types import ChatRequest, Chunk, LoadProgress

log = logging.getLogger(__name__)

BATCH_S = 0.06  # streamed text reaches the GUI at most ~16 times a second
PROGRESS_S = 0.1
OnDone = Callable[[Any, BaseException | None], None]


class Tasks(QObject):
    """Runs work off the GUI thread and brings results back to it.

    Signals:
        _closure_posted(object): private; carries a closure from any thread to the GUI thread.
    """

    _closure_posted = Signal(object)

    def __init__(self, workers: int = 4, parent: QObject | None = None):
        super().__init__(parent)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fireside-task")
        self._closure_posted.connect(self._on_closure_posted)
        self._closed = False

    def run_on_main(self, closure: Callable[[], None]) -> None:
        """Call ``closure`` on the GUI thread, soon. Safe from any thread."""
        self._closure_posted.emit(closure)

    def run_in_background(self, fn: Callable[[], Any], on_done: OnDone | None = None) -> Future | None:
        """Run ``fn`` on the pool; ``on_done(result, error)`` then runs on the GUI thread."""
        if self._closed:
            return None
        future = self._pool.submit(fn)
        if on_done is not None:
            future.add_done_callback(lambda f: self.run_on_main(lambda: _deliver(f, on_done)))
        return future

    @Slot(object)
    def _on_closure_posted(self, closure: Callable[[], None]) -> None:
        try:
            closure()
        except Exception as exc:  # a failing callback must never take the event loop down
            from .feedback import show_error

            show_error(exc)

    def close(self, wait: bool = True) -> None:
        """Refuse new work and, with ``wait``, let running tasks finish."""
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=True)


def _deliver(future: Future, on_done: OnDone) -> None:
    if future.cancelled():
        return
    error = future.exception()
    on_done(None if error else future.result(), error)


class EngineBridge(QObject):
    """The runtime, as signals. One per app; lives on the GUI thread.

    Signals:
        load_progress(str, float): model id, fraction loaded (sampled, ~10 a second).
        load_finished(str, object): model id, its ``LoadedModel``.
        load_failed(str, object): model id, the exception (``LoadCancelled`` when the user cancelled).
        loaded_changed(): the set of loaded models changed (loaded, unloaded, crashed).
        reply_text(int, str, str): reply id, chunk kind (``text`` or ``reasoning``), batched text.
        reply_finished(int, object): reply id, the final ``Chunk`` (finish_reason and usage).
        reply_failed(int, object): reply id, the exception.
    """

    load_progress = Signal(str, float)
    load_finished = Signal(str, object)
    load_failed = Signal(str, object)
    loaded_changed = Signal()
    reply_text = Signal(int, str, str)
    reply_finished = Signal(int, object)
    reply_failed = Signal(int, object)

    def __init__(self, runtime, tasks: Tasks, parent: QObject | None = None):
        super().__init__(parent)
        self.runtime = runtime
        self.tasks = tasks
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
            loaded = self.runtime.load(model_id, options, on_progress=on_progress, cancel=cancel)
        except Exception as exc:
            self.load_failed.emit(model_id, exc)
        else:
            self.load_finished.emit(model_id, loaded)
        finally:
            self._untrack(f"load:{model_id}")
            self.loaded_changed.emit()

    def cancel_load(self, model_id: str) -> None:
        with self._lock:
            event = self._cancels.get(f"load:{model_id}")
        if event:
            event.set()

    def unload(self, model_id: str) -> None:
        self.tasks.run_in_background(lambda: self.runtime.unload(model_id),
                                     lambda _r, _e: self.loaded_changed.emit())

    # --- chatting --------------------------------------------------------------------------------
    def chat(self, reply_id: int, model_id: str, request: ChatRequest) -> threading.Event:
        """Stream a reply on a worker; returns the event that stops it (the Stop button sets it)."""
        cancel = self._track(f"reply:{reply_id}")
        self.tasks.run_in_background(lambda: self._chat(reply_id, model_id, request, cancel))
        return cancel

    def _chat(self, reply_id: int, model_id: str, request: ChatRequest, cancel: threading.Event) -> None:
        was_loaded = self.runtime.is_loaded(model_id)
        try:
            done = self._stream(reply_id, self.runtime.chat(model_id, request, cancel=cancel))
        except Exception as exc:
            self.reply_failed.emit(reply_id, exc)
        else:
            self.reply_finished.emit(reply_id, done)
        finally:
            self._untrack(f"reply:{reply_id}")
            if not was_loaded or not self.runtime.is_loaded(model_id):
                self.loaded_changed.emit()

    def _stream(self, reply_id: int, chunks) -> Chunk:
        pending: dict[str, list[str]] = {}
        last = 0.0
        done = Chunk("done", finish_reason="stop")
        for chunk in chunks:
            if chunk.kind == "done":
                done = chunk
                break
            if chunk.kind in ("text", "reasoning") and chunk.text:
                pending.setdefault(chunk.kind, []).append(chunk.text)
            now = time.monotonic()
            if pending and now - last >= BATCH_S:
                last = now
                self._flush(reply_id, pending)
        self._flush(reply_id, pending)
        return done

    def _flush(self, reply_id: int, pending: dict[str, list[str]]) -> None:
        for kind, parts in pending.items():
            self.reply_text.emit(reply_id, kind, "".join(parts))
        pending.clear()

    def stop(self, reply_id: int) -> None:
        with self._lock:
            event = self._cancels.get(f"reply:{reply_id}")
        if event:
            event.set()

    # --- bookkeeping -----------------------------------------------------------------------------
    def _track(self, key: str) -> threading.Event:
        event = threading.Event()
        with self._lock:
            self._cancels[key] = event
        return event

    def _untrack(self, key: str) -> None:
        with self._lock:
            self._cancels.pop(key, None)

    def busy(self) -> bool:
        with self._lock:
            return bool(self._cancels)

    def cancel_all(self) -> None:
        """Set every cancel event: stops every load and reply in flight (used at shutdown)."""
        with self._lock:
            events = list(self._cancels.values())
        for event in events:
            event.set()
