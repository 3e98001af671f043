"""The app's own preferences (theme, tray, remembered load settings, last model, server choices),
kept as one small JSON file in the config folder and written atomically on every change.

Engine-wide paths still come from ``Settings``; these are the choices a person makes in the window.
Secrets never land here: the hub token and the server's API key live in the OS keyring.
"""

from __future__ import annotations

import json
import logging
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


class Prefs:
    def __init__(self, path: Path):
        self.path = Path(path)
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

    def save(self) -> None:
        """Write temp, fsync, rename, fsync the folder: a crash keeps the old file or the new one."""
        atomic_write(self.path, json.dumps(self.data, indent=2))
