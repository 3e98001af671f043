r"""The app's own preferences (theme, tray, remembered load settings, last model, server choices),
kept as one small JSON file in the config folder and written atomically on every change.

A change is in ``data`` at once; the file is written on the task pool when the app gives one (``main``
does), so a send never waits on the two ``fsync``\ s of an atomic write: the GUI thread only serialises
the new state, one worker writes the newest state it finds, and ``flush`` writes what is left at
shutdown. Without a pool (a script, a test) every change is written before ``set`` returns.

Engine-wide paths still come from ``Settings``; these are the choices a person makes in the window.
Secrets never land here: the hub token and the server's API key live in the OS keyring.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from fireside.engine.fsutil import atomic_write

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    "theme": "system",  # "light", "dark" or "system"
    "keep_server_in_tray": False,
    "last_model": None,
    "load_options": {},  # model id -> LoadOptions as a dict
    "model_defaults": {},  # model id -> {"system_prompt": ...}
    "default_load": {},  # LoadOptions as a dict, used when a model has none of its own
    "models_dirs": [],  # extra models folders, after the default one
    "last_used": {},  # model id -> epoch seconds
    "prompt_cache": {"enabled": True, "cap_gib": None},  # None: the engine's default cap
    "server": {"port": None, "network": False, "origins": "", "jit": True, "idle_min": 10},
}
PER_MODEL = ("load_options", "model_defaults", "last_used")  # the maps keyed by model id


class Prefs:
    def __init__(self, path: Path, tasks: Any = None):
        self.path = Path(path)
        self.tasks = tasks  # a ``Tasks`` pool to save on, or None to save in the caller
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write at a time: the pool's and flush's
        self._pending: str | None = None  # the newest state not yet written
        self._writer = False  # a save is queued or running on the pool
        self.data: dict[str, Any] = json.loads(json.dumps(DEFAULTS))
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(saved, dict):
                self.data.update(saved)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable preferences %s: %s", self.path, exc)

    def get(self, key: str) -> Any:
        return self.data.get(key, DEFAULTS.get(key))

    def set(self, key: str, value: Any) -> None:
        self.data[key] = value
        self.save()

    def put(self, key: str, sub: str, value: Any) -> None:
        """Set ``self[key][sub]`` (for the per-model maps) and save."""
        table = dict(self.get(key) or {})
        table[sub] = value
        self.set(key, table)

    def rename_models(self, renames: dict[str, str]) -> None:
        """Move what is kept per model from ids an older Fireside gave to today's (``{old: new}``): saved
        load settings, the system prompt, last use and the last model. A value already kept under the
        new id wins. Saves once, and only when something moved."""
        moved = False
        for key in PER_MODEL:
            table = dict(self.get(key) or {})
            for old in [k for k in table if k in renames]:
                table.setdefault(renames[old], table[old])
                del table[old]
                moved = True
            self.data[key] = table
        if self.get("last_model") in renames:
            self.data["last_model"] = renames[self.get("last_model")]
            moved = True
        if moved:
            self.save()

    def save(self) -> None:
        """Write temp, fsync, rename, fsync the folder: a crash keeps the old file or the new one. On the
        pool when there is one (a failure is logged there), else here (a failure raises)."""
        text = json.dumps(self.data, indent=2)  # here: ``data`` only changes on this thread
        if self.tasks is None:
            with self._write_lock:
                atomic_write(self.path, text)
            return
        with self._lock:
            self._pending, start = text, not self._writer
            self._writer = True
        if start and self.tasks.run_in_background(self._drain) is None:  # the pool is closed
            self.flush()

    def flush(self) -> None:
        """Write the newest state not yet written, here (shutdown calls it after the pool stopped)."""
        with self._write_lock:
            with self._lock:
                text, self._pending, self._writer = self._pending, None, False
            if text is not None:
                atomic_write(self.path, text)

    def _drain(self) -> None:
        with self._write_lock:
            while True:
                with self._lock:
                    text, self._pending = self._pending, None
                    if text is None:
                        self._writer = False
                        return
                try:
                    atomic_write(self.path, text)
                except Exception as exc:  # the pool only logs it: say so here, and keep draining
                    log.warning("could not save the preferences to %s: %s", self.path, exc)
