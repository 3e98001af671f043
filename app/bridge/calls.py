"""The bridge's one-shot calls: each asks the engine one thing on the task pool and answers on the GUI thread
with ``on_done(result, error)``. The model library (listed, imported from files, folders or other apps,
deleted, a model's header read), this machine (its hardware, the workarounds the engine keeps for it), the
Hugging Face token in the OS keyring, and the remote engines. ``EngineBridge`` (``bridge.py``) offers them
as its own methods; the loads and replies it tracks, and their signals, stay there.
"""

from __future__ import annotations

from pathlib import Path

from fireside.engine.errors import RemoteError

from .tasks import OnDone

NO_KEYRING = ("No OS keyring is available on this machine, so Fireside cannot keep this remote's API key "
              "safely. Install and unlock one (GNOME Keyring or KWallet on Linux), or add the remote "
              "without a key.")


class EngineCalls:
    """The one-shot calls of ``EngineBridge``, which gives them ``engine``, ``tasks`` (the task pool) and
    ``loaded_changed`` (emitted when deleting a model unloaded it)."""

    # --- the model library ---------------------------------------------------------------------
    def list_models(self, on_done: OnDone) -> None:
        """The library's models and their disk use: ``(models, (own bytes, linked bytes))``."""
        from fireside.engine.library import disk_use

        def work():
            models = self.engine.library().list()
            return models, disk_use(models)
        self.tasks.run_in_background(work, on_done)

    def model_ids(self, on_done: OnDone) -> None:
        """Every model id to offer in a picker (embedders left out: they cannot chat), local then remote
        engines' then paired devices', whether some remote or device did not answer, the local ones that can
        see images, and the device each device model runs on: ``(ids, remote_missing, vision, {id: device})``
        (a dead remote lists nothing, within a few seconds)."""
        def work():
            statuses = self.engine.remote_statuses()
            models = [m for s in statuses for m in s.models]
            on_device = {m.id: m.remote for m in models if getattr(m, "kind", "remote") == "device"}
            remote = [m.id for m in models if m.id not in on_device] + [m.id for m in models if m.id in on_device]
            local = [m for m in self.engine.library().list() if not m.info.embeds_only]  # embedders cannot chat
            vision = {m.id for m in local if m.projector}  # (the picker's ids; vision_models() names aliases)
            return [m.id for m in local] + remote, any(s.error for s in statuses), vision, on_device
        self.tasks.run_in_background(work, on_done)

    def former_ids(self, on_done: OnDone) -> None:
        """``{old id: id}`` for every name an older Fireside gave a model in the library."""
        def work():
            return {old: m.id for m in self.engine.library().list() for old in m.former if old != m.id}

        self.tasks.run_in_background(work, on_done)

    def import_files(self, paths: list[Path], on_done: OnDone) -> None:
        self.tasks.run_in_background(lambda: [self.engine.library().add_file(p) for p in paths], on_done)

    def import_folder(self, folder: Path, on_done: OnDone) -> None:
        """Import every GGUF file under ``folder`` (walked on the worker)."""
        def work():
            library = self.engine.library()
            return [library.add_file(p) for p in sorted(Path(folder).rglob("*.gguf"))]
        self.tasks.run_in_background(work, on_done)

    def import_app(self, app: str, on_done: OnDone) -> None:
        """Import what another app (LM Studio, Ollama, ...) keeps in its default folders: ``on_done((models
        imported, the folders looked in))``."""
        from fireside.engine.library import default_locations, find, import_found

        def work():
            places = default_locations(app, self.engine.settings)
            found = find(app, places)
            imported = [m for _f, m in import_found(self.engine.library(), found) if not isinstance(m, str)]
            return imported, [p for p in places if p.exists()] or places  # where it looked, for "nothing found"
        self.tasks.run_in_background(work, on_done)

    def delete_model(self, model_id: str, on_done: OnDone) -> None:
        """Unload ``model_id``, then delete its files, in one task: no runner holds a file being removed."""
        def work():
            self.engine.unload(model_id)
            return self.engine.library().remove(model_id)
        self.tasks.run_in_background(work, lambda result, error: (self.loaded_changed.emit(), on_done(result, error)))

    def inspect(self, model_id: str, on_done: OnDone) -> None:
        """``(ModelInfo, Hardware, attention)`` for the load dialog: the model's header, this machine, and what
        it measured of the model's attention (a dict, or None before the architecture's first load)."""
        from fireside.engine.models import hardware

        def work():
            info = self.engine.model_info(model_id)
            return info, hardware.detect(), self.engine.measured_attention(info)
        self.tasks.run_in_background(work, on_done)

    def lending_devices(self, on_done: OnDone) -> None:
        """The paired devices a load may place layers on (names), for the load dialog."""
        self.tasks.run_in_background(self.engine.lending_devices, on_done)

    def lent(self, names: list[str], on_done: OnDone) -> None:
        """``(devices, why any could not be used)``: what the named paired devices lend now."""
        self.tasks.run_in_background(lambda: self.engine.lent(list(names)), on_done)

    # --- this machine ----------------------------------------------------------------------------
    def hardware(self, on_done: OnDone) -> None:
        from fireside.engine.models import hardware

        self.tasks.run_in_background(lambda: hardware.detect(refresh=True), on_done)

    def workarounds(self, on_done: OnDone) -> None:
        self.tasks.run_in_background(self.engine.workarounds.entries, on_done)

    def clear_workarounds(self, on_done: OnDone) -> None:
        self.tasks.run_in_background(self.engine.workarounds.clear, on_done)

    # --- secrets ---------------------------------------------------------------------------------
    def token_state(self, on_done: OnDone) -> None:
        """``(keyring available, a Hugging Face token is saved)``, read on a worker."""
        from fireside.engine.hub import get_token
        from fireside.engine.secrets import keyring_available

        self.tasks.run_in_background(lambda: (keyring_available(), bool(get_token())), on_done)

    def save_token(self, token: str, on_done: OnDone) -> None:
        from fireside.engine.hub import set_token

        self.tasks.run_in_background(lambda: set_token(token), on_done)

    def delete_token(self, on_done: OnDone) -> None:
        from fireside.engine.hub import delete_token

        self.tasks.run_in_background(delete_token, on_done)

    # --- remote engines --------------------------------------------------------------------------
    def remote_statuses(self, fresh: bool, on_done: OnDone) -> None:
        """Ask every remote for its models (``fresh`` skips the engine's short cache)."""
        self.tasks.run_in_background(lambda: self.engine.remote_statuses(fresh=fresh), on_done)

    def add_remote(self, name: str, url: str, api_key: str | None, on_done: OnDone) -> None:
        """Add a remote; one with a key is refused, in words, where no OS keyring can keep the key."""
        from fireside.engine.secrets import keyring_available

        def work():
            if api_key and not keyring_available():
                raise RemoteError(NO_KEYRING)
            return self.engine.add_remote(name, url, api_key or None)
        self.tasks.run_in_background(work, on_done)

    def remove_remote(self, name: str, on_done: OnDone) -> None:
        self.tasks.run_in_background(lambda: self.engine.remove_remote(name), on_done)
