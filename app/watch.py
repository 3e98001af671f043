"""Notices what other processes change in the configuration the app shares with them, so a running window
shows it without a click: a remote added with ``fireside remote add``, a device paired or revoked with
``fireside devices``, a model pulled or imported from
the CLI (the library index and the models folders), the models folders another window saved.

A cheap poll, not file-system notifications: every ``POLL_MS`` a worker reads the modification times
and sizes of a handful of files and folders (never on the GUI thread), and the watcher compares them
with the last reading. ``QFileSystemWatcher`` would miss the index's WAL file being rewritten in place
and files replaced by rename (how remotes.json and app.json are written), and would need re-arming.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal, Slot

from .context import AppContext

POLL_MS = 1500


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _folder_stamps(root: Path, depth: int = 2) -> list:
    """Modification times of ``root`` and the folders under it, ``depth`` levels down (publisher/repo):
    adding or removing a file changes its folder's time."""
    stamps, level = [], [root]
    for _ in range(depth + 1):
        stamps += [(str(p), _stamp(p)) for p in level]
        level = [c for p in level if p.is_dir() for c in sorted(p.iterdir()) if c.is_dir()][:500]
    return stamps


def read_snapshot(remotes: Path, index: Path, prefs: Path, folders: list[Path]) -> dict:
    """What the watcher compares; runs on a worker."""
    try:
        saved = json.loads(prefs.read_text(encoding="utf-8")).get("models_dirs") or []
    except (OSError, ValueError, AttributeError):
        saved = None
    wal = index.with_name(index.name + "-wal")
    devices = remotes.with_name("devices.json")  # paired devices are remotes too (``fireside devices pair``)
    return {"remotes": (_stamp(remotes), _stamp(devices)), "index": (_stamp(index), _stamp(wal)),
            "folders": [_folder_stamps(f) for f in folders], "saved_folders": saved}


class ConfigWatcher(QObject):
    """Polls the shared configuration; lives on the GUI thread.

    Signals:
        remotes_changed(): the remote engines' list or the paired devices changed.
        library_changed(): the library index or a models folder changed.
        folders_changed(list): the models folders saved in the preferences changed (extra folders, str).
    """

    remotes_changed = Signal()
    library_changed = Signal()
    folders_changed = Signal(list)

    def __init__(self, ctx: AppContext, parent: QObject | None = None):
        super().__init__(parent)
        self.ctx = ctx
        self._last: dict | None = None
        self._reading = False
        self._timer = QTimer(self, interval=POLL_MS)
        self._timer.timeout.connect(self._on_timer_timeout)

    def start(self) -> None:
        self._timer.start()
        self._on_timer_timeout()  # the first reading is the baseline

    def stop(self) -> None:
        self._timer.stop()

    @Slot()
    def _on_timer_timeout(self) -> None:
        if self._reading:
            return
        s = self.ctx.settings
        remotes = getattr(self.ctx.engine, "remotes_file", None) or s.config_dir / "remotes.json"
        args = (Path(remotes), s.library_db,
                Path(self.ctx.prefs.path), list(s.models_dirs))
        self._reading = self.ctx.tasks.run_in_background(lambda: read_snapshot(*args), self._on_read) is not None

    def _on_read(self, snapshot, error) -> None:
        self._reading = False
        if error is not None:
            return
        last, self._last = self._last, snapshot
        if last is None:
            return
        if snapshot["remotes"] != last["remotes"]:
            self.remotes_changed.emit()
        saved = snapshot["saved_folders"]
        current = [str(p) for p in self.ctx.settings.models_dirs[1:]]
        if saved is not None and saved != last["saved_folders"] and saved != current:
            self.folders_changed.emit(list(saved))
        elif snapshot["index"] != last["index"] or snapshot["folders"] != last["folders"]:
            self.library_changed.emit()
