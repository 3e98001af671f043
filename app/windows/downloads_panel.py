"""The downloads panel: one row per pull with a progress bar, speed, ETA, and pause, resume and cancel.

The bridge's ``DownloadsController`` (``app/bridge/downloading.py``) runs the pulls and turns the download
workers' callbacks into signals (the manager already samples progress about ten times a second),
connected to bound slots of the panel, so every widget update runs on the GUI thread.
"""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QProgressBar, QPushButton, QVBoxLayout, QWidget

from fireside.engine.fmt import human_bytes

from ..bridge.downloading import DownloadsController
from ..feedback import show_error


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs:02d} s" if minutes else f"{secs} s"


class _JobRow:
    def __init__(self, grid: QGridLayout, row: int, panel: DownloadsPanel, job):
        self.name = QLabel(f"{job.repo_id} · {job.selector or 'best'}")
        self.bar = QProgressBar(maximum=1000)
        self.detail = QLabel("queued")
        self.pause = QPushButton("Pause")
        self.cancel = QPushButton("Cancel")
        self.pause.clicked.connect(lambda: panel.toggle_pause(job.id))
        self.cancel.clicked.connect(lambda: panel.cancel(job.id))
        for col, w in enumerate((self.name, self.bar, self.detail, self.pause, self.cancel)):
            grid.addWidget(w, row, col)

    def show(self, job) -> None:
        p = job.progress
        if p is not None and p.total:
            self.bar.setValue(int(1000 * p.done / p.total))
            self.detail.setText(f"{human_bytes(p.done)} of {human_bytes(p.total)} · {human_bytes(p.speed)}/s · "
                                f"{_eta(p.eta_s)} left" if p.state == "downloading" else p.state)
        done = job.state in ("done", "failed", "cancelled")
        if job.state in ("done", "failed", "cancelled", "paused"):
            self.detail.setText({"done": "Done: in My Models", "paused": "Paused",
                                 "cancelled": "Cancelled"}.get(job.state, f"Failed: {job.error}"))
        self.pause.setText("Resume" if job.state == "paused" else "Pause")
        self.pause.setEnabled(not done)
        self.cancel.setEnabled(not done)


class DownloadsPanel(QGroupBox):
    """Pulls in flight and finished, as the ``DownloadsController`` reports them.

    Signals:
        model_added(object): a finished ``DownloadJob`` whose model is now in the library.
    """

    model_added = Signal(object)

    def __init__(self, downloads: DownloadsController, parent: QWidget | None = None):
        super().__init__("Downloads", parent)
        self.downloads = downloads
        downloads.job_started.connect(self._on_downloads_job_started)
        downloads.job_progressed.connect(self._on_downloads_job_progressed)
        downloads.job_finished.connect(self._on_downloads_job_finished)
        downloads.job_failed.connect(self._on_downloads_job_failed)
        self.rows: dict[int, _JobRow] = {}
        self.jobs: dict[int, object] = {}
        self.grid = QGridLayout()
        self.empty = QLabel("No downloads yet. Pick a file above and press Download.")
        lay = QVBoxLayout(self)
        lay.addWidget(self.empty)
        lay.addLayout(self.grid)

    @Slot(object)
    def _on_downloads_job_started(self, job) -> None:
        self.add(job)

    @Slot(str, object)
    def _on_downloads_job_failed(self, what: str, error) -> None:
        show_error(error, f"downloading {what}")

    def add(self, job) -> None:
        self.empty.hide()
        self.jobs[job.id] = job
        if job.id not in self.rows:
            self.rows[job.id] = _JobRow(self.grid, len(self.rows), self, job)
        self.rows[job.id].show(job)

    def toggle_pause(self, job_id: int) -> None:
        job = self.jobs[job_id]
        if job.state == "paused":
            self.rows[job_id].pause.setEnabled(False)  # until the resumed job starts
            self.downloads.resume(job_id)
        else:
            self.downloads.pause(job_id)

    def cancel(self, job_id: int) -> None:
        self.downloads.cancel(job_id)

    @Slot(object)
    def _on_downloads_job_progressed(self, job) -> None:
        if self.jobs.get(job.id) is job:
            self.rows[job.id].show(job)

    @Slot(object)
    def _on_downloads_job_finished(self, job) -> None:
        if self.jobs.get(job.id) is job:
            self.rows[job.id].show(job)
        if job.state == "done":
            self.model_added.emit(job)
