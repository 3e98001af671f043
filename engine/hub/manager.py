"""Several pulls at once, each on its own worker thread, with pause, resume and cancel.

``DownloadManager(hub).start(repo_id, selector)`` returns a ``DownloadJob`` at once; the pull runs on a
thread from a small pool and reports through ``on_progress`` (sampled, about ten times a second) and
``on_done`` (the job, finished, failed or paused). Two jobs for one file share its download: the
second waits on the part's lock (progress state ``waiting``) and then finds the file in place. Pausing sets the job's cancel event: the part file
stays, and ``resume`` starts the same pull again, which continues with a Range request. ``cancel``
also deletes the part. The app's downloads controller (``app/downloads.py``, owned by the bridge) and
the server's ``/api/pull`` are its callers.

Threading: every method may be called from any thread; callbacks run on the job's worker thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ..errors import FiresideError
from ..library import LibraryModel
from .downloads import DownloadCancelled, Progress
from .hub import Hub

log = logging.getLogger(__name__)


@dataclass
class DownloadJob:
    """One pull: its state is ``queued``, ``running``, ``paused``, ``cancelled``, ``done`` or ``failed``."""

    id: int
    repo_id: str
    selector: str | None
    state: str = "queued"
    progress: Progress | None = None
    model: LibraryModel | None = None
    error: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    force: bool = False  # pull even when the fit gate says the model cannot run here
    _delete_part: bool = False


class DownloadManager:
    def __init__(self, hub: Hub, workers: int = 3,
                 on_progress: Callable[[DownloadJob], None] | None = None,
                 on_done: Callable[[DownloadJob], None] | None = None):
        self.hub = hub
        self.on_progress, self.on_done = on_progress, on_done
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fireside-download")
        self.jobs: dict[int, DownloadJob] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def start(self, repo_id: str, selector: str | None = None, force: bool = False) -> DownloadJob:
        """Queue a pull; one that cannot fit on this machine fails (``ModelTooLarge``) unless ``force``."""
        job = DownloadJob(next(self._ids), repo_id, selector, force=force)
        with self._lock:
            self.jobs[job.id] = job
        self.pool.submit(self._run, job)
        return job

    def pause(self, job_id: int) -> None:
        self.jobs[job_id].cancel.set()

    def resume(self, job_id: int) -> DownloadJob:
        old = self.jobs[job_id]
        old.finished.wait()
        job = DownloadJob(old.id, old.repo_id, old.selector, force=old.force)
        with self._lock:
            self.jobs[job.id] = job
        self.pool.submit(self._run, job)
        return job

    def cancel(self, job_id: int) -> None:
        job = self.jobs[job_id]
        job._delete_part = True
        job.cancel.set()

    def shutdown(self) -> None:
        """Pause every running pull (parts are kept) and wait for the workers."""
        for job in list(self.jobs.values()):
            job.cancel.set()
        self.pool.shutdown(wait=True)

    def _run(self, job: DownloadJob) -> None:
        job.state = "running"

        def progress(p: Progress) -> None:
            job.progress = p
            if self.on_progress:
                self.on_progress(job)

        try:
            job.model = self.hub.pull(job.repo_id, job.selector, on_progress=progress, cancel=job.cancel,
                                      force=job.force)
            job.state = "done"
        except DownloadCancelled:
            job.state = "cancelled" if job._delete_part else "paused"
            if job._delete_part:
                self._delete_parts(job)
        except FiresideError as exc:
            job.state, job.error = "failed", str(exc)
        except Exception as exc:  # a worker must never die silently: report it on the job
            log.exception("pull of %s failed", job.repo_id)
            job.state, job.error = "failed", f"unexpected error: {exc}"
        job.finished.set()
        if self.on_done:
            self.on_done(job)

    def _delete_parts(self, job: DownloadJob) -> None:
        """Only the file this job was fetching: another job may be pulling a sibling in the same repo."""
        if job.progress is None:
            return
        dest = self.hub.library.destination(job.repo_id, job.progress.filename)
        for suffix in (".part", ".part.json"):
            dest.with_name(dest.name + suffix).unlink(missing_ok=True)
