"""Loading models for the app, with no widget in the way: which load is under way and with which
settings, and what a load leaves behind in the preferences.

``ModelLoader`` is asked for a model that can answer (``ensure_loaded``, by the chat session) or for a
load with chosen settings (the Load dialog); the model bar above a chat only shows what it says. Load
settings never stick when they fail: settings chosen in the Load dialog are saved only once a load with
them succeeded, and saved settings that fail to load are set back to Auto (the user is told), so one bad
choice cannot make every later message fail. My Models' "Last used" is kept here, whoever asked for the
model: every load through the bridge, and every reply that finds its model already loaded.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Signal, Slot

from fireside.engine.errors import LoadCancelled
from fireside.engine.models import LoadOptions
from fireside.engine.remote import is_remote

from ..feedback import show_error
from .bridge import EngineBridge

AUTO = {"auto": True}  # a model's saved settings that say "let the planner choose", whatever the default is


def options_dict(o: LoadOptions | None) -> dict:
    """``o`` as saved in the preferences; Auto (None or all defaults) is ``{}``."""
    from dataclasses import asdict

    if o is None or o == LoadOptions():
        return {}
    return {k: v for k, v in asdict(o).items() if v is not None}


def describe_options(o: LoadOptions | None) -> str:
    """``context 2,048 · KV cache q4_0 · flash attention off``: the settings a person chose, in words."""
    if o is None or o == LoadOptions():
        return "Auto settings"
    parts = [f"context {o.context:,}" if o.context else "", f"{o.n_gpu_layers} GPU layers" if o.n_gpu_layers else "",
             f"KV cache {o.kv_type}" if o.kv_type != "auto" else "",
             {True: "flash attention on", False: "flash attention off"}.get(o.flash_attn, ""),
             f"{o.parallel} slot{'s' * (o.parallel != 1)}" if o.parallel else "",
             "prompt lookup drafts" if o.drafts else "", f"draft model {o.draft}" if o.draft else "",
             f"layers also on {' and '.join(o.with_devices)}" if o.with_devices else ""]
    return " · ".join(p for p in parts if p) or "Auto settings"


class ModelLoader(QObject):
    """The app's loads: one at a time from the chat, each with the settings it came with.

    Signals:
        started(str): a load of this model id began (its progress comes as ``bridge.load_progress``).
        ended(str): the load of this model id ended, loaded, failed or cancelled.
        model_ready(str): the model finished loading and can answer.
    """

    started = Signal(str)
    ended = Signal(str)
    model_ready = Signal(str)

    def __init__(self, bridge: EngineBridge, prefs, parent: QObject | None = None):
        super().__init__(parent)
        self.bridge, self.prefs = bridge, prefs
        self.loading: str | None = None
        self._attempt: tuple[str, LoadOptions | None, str] | None = None  # model, options, where they came from
        bridge.load_finished.connect(self._on_bridge_load_finished)
        bridge.load_failed.connect(self._on_bridge_load_failed)

    def ensure_loaded(self, model_id: str) -> bool:
        """True when ``model_id`` can answer now (its "Last used" becomes now); otherwise start loading it
        (``model_ready`` follows)."""
        if self.bridge.engine.is_loaded(model_id):
            if not is_remote(model_id):  # a remote model is loaded on its own server; errors come with the reply
                self.prefs.put("last_used", model_id, time.time())
            return True
        if self.loading != model_id:
            self.load(model_id)
        return False

    def load(self, model_id: str, options: LoadOptions | None = None, *, remember: bool = False) -> None:
        """Load ``model_id`` with ``options`` (None: its saved settings); ``remember`` saves the options
        as the model's settings once the load succeeds (the Load dialog's choice)."""
        source = "chosen" if remember else "given"
        if options is None:
            saved = (self.prefs.get("load_options") or {}).get(model_id) or self.prefs.get("default_load")
            options = LoadOptions.from_dict(saved) if saved else None
            source = "saved" if options is not None and options != LoadOptions() else "auto"
        self._attempt = (model_id, options, source)
        self.loading = model_id
        self.started.emit(model_id)
        self.bridge.load(model_id, options)

    def cancel(self) -> None:
        if self.loading:
            self.bridge.cancel_load(self.loading)

    @Slot(str, object)
    def _on_bridge_load_finished(self, model_id: str, loaded) -> None:
        attempt = self._take_attempt(model_id)
        self._end_load(model_id)
        for warning in loaded.warnings:  # a healed or shrunk load: say what changed
            show_error(warning)
        if attempt and attempt[2] == "chosen":
            self.prefs.put("load_options", model_id, options_dict(attempt[1]))
        self.prefs.put("last_used", model_id, loaded.loaded_at)
        self.model_ready.emit(model_id)

    @Slot(str, object)
    def _on_bridge_load_failed(self, model_id: str, error) -> None:
        attempt = self._take_attempt(model_id)
        self._end_load(model_id)
        if isinstance(error, LoadCancelled):
            return
        source, options = (attempt[2], attempt[1]) if attempt else ("given", None)
        if source == "chosen":
            show_error(error, f"loading {model_id} with {describe_options(options)} failed (its saved load "
                              "settings are unchanged)")
        elif source == "saved":
            self.prefs.put("load_options", model_id, dict(AUTO))
            show_error(error, f"loading {model_id} with its saved settings ({describe_options(options)}) failed; "
                              "they are set back to Auto, so Retry loads it with Fireside's choice")
        else:
            show_error(error, f"loading {model_id}")

    def _take_attempt(self, model_id: str) -> tuple[str, LoadOptions | None, str] | None:
        attempt = self._attempt
        if attempt is None or attempt[0] != model_id:
            return None
        self._attempt = None
        return attempt

    def _end_load(self, model_id: str) -> None:
        if model_id == self.loading:
            self.loading = None
            self.ended.emit(model_id)
