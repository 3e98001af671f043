"""Work off the GUI thread, results back on it, in the manner of Anki's ``taskman``.

``Tasks.run_in_background(fn, on_done)`` runs ``fn`` on a small thread pool and calls ``on_done(result,
error)`` on the GUI thread; ``Tasks.run_on_main(closure)`` schedules a closure on the GUI thread through
one private signal of a QObject that lives there. The bridge (``bridge.py``) and its controllers run
every engine call through one ``Tasks``; pages never start threads of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

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
            from ..feedback import show_error

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
