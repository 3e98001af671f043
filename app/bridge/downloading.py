"""The hub as the app uses it: search, repo details, fit checks and downloads (part of the bridge:
``ctx.bridge.downloads``).

``DownloadsController`` makes the engine's ``Hub`` (which reads the Hugging Face token from the OS
keyring) and its ``DownloadManager`` once, on a worker, under a lock, so two first requests never build
two; every hub call runs on the task pool. The manager calls back on its download workers; those
callbacks become this object's signals, which Qt queues onto the GUI thread. Resuming waits for the
paused pull's worker to let go of its part file, so it runs on a worker too. ``extras["hub_factory"]``
(a test's fake hub) is read when the hub is first needed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from .tasks import OnDone, Tasks


class DownloadsController(QObject):
    """Hub requests and pulls, off the GUI thread. Lives on the GUI thread.

    Signals:
        job_started(object): a ``DownloadJob`` queued (a new pull, or a paused one resumed).
        job_progressed(object): a ``DownloadJob`` with fresh ``progress`` (sampled by the manager).
        job_finished(object): a ``DownloadJob`` that is done, failed, paused or cancelled.
        job_failed(str, object): what could not be started (a repo id), and the exception.
    """

    job_started = Signal(object)
    job_progressed = Signal(object)
    job_finished = Signal(object)
    job_failed = Signal(str, object)

    def __init__(self, settings, tasks: Tasks, extras: dict[str, Any], parent: QObject | None = None):
        super().__init__(parent)
        self.settings, self.tasks, self.extras = settings, tasks, extras
        self.hub = None
        self.manager = None
        self._lock = threading.Lock()

    def _ensure(self):
        """The hub and the download manager, made on first use. Runs on a worker."""
        with self._lock:
            if self.hub is None:
                factory: Callable[[], Any] | None = self.extras.get("hub_factory")
                if factory is None:
                    from fireside.engine.hub import Hub

                    hub = Hub(self.settings)
                else:
                    hub = factory()
                from fireside.engine.hub import DownloadManager

                self.manager = DownloadManager(hub, on_progress=self.job_progressed.emit,
                                               on_done=self.job_finished.emit)
                self.hub = hub
            return self.hub

    # --- the hub ---------------------------------------------------------------------------------
    def search(self, query: str, sort: str, on_done: OnDone) -> None:
        self.tasks.run_in_background(lambda: self._ensure().search(query, sort=sort, limit=40), on_done)

    def repo(self, repo_id: str, on_done: OnDone) -> None:
        self.tasks.run_in_background(lambda: self._ensure().repo(repo_id), on_done)

    def fit(self, repo_id: str, file, on_done: OnDone) -> None:
        """How ``file`` fits this machine, from its real header (a Range read)."""
        self.tasks.run_in_background(lambda: self._ensure().fit(repo_id, file), on_done)

    # --- pulls -----------------------------------------------------------------------------------
    def start(self, repo_id: str, selector: str) -> None:
        """Queue a pull; ``job_started`` follows (or ``job_failed``)."""
        self.tasks.run_in_background(lambda: self._start(repo_id, selector))

    def _start(self, repo_id: str, selector: str) -> None:
        try:
            self._ensure()
            job = self.manager.start(repo_id, selector)
        except Exception as exc:
            self.job_failed.emit(repo_id, exc)
        else:
            self.job_started.emit(job)

    def pause(self, job_id: int) -> None:
        if self.manager is not None:
            self.manager.pause(job_id)  # sets the job's cancel event: the part file stays

    def resume(self, job_id: int) -> None:
        self.tasks.run_in_background(lambda: self._resume(job_id))

    def _resume(self, job_id: int) -> None:
        try:
            job = self.manager.resume(job_id)  # waits for the paused pull's worker to finish
        except Exception as exc:
            self.job_failed.emit(str(job_id), exc)
        else:
            self.job_started.emit(job)

    def cancel(self, job_id: int) -> None:
        if self.manager is not None:
            self.manager.cancel(job_id)

    def shutdown(self) -> None:
        """Pause every pull (parts are kept) and join the download workers."""
        with self._lock:
            manager = self.manager
        if manager is not None:
            manager.shutdown()
