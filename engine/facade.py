"""The ``Engine``: the one object the server, the CLI and the desktop app hold to reach models.

It routes each model id to whoever serves it: ``remote/NAME/MODEL`` ids to the ``RemoteEngine``
(``engine/remote``), which forwards them to a server elsewhere, and every other id to the local
``Runtime`` (``engine/runtime``), which owns the runner processes. Its request methods have the
Runtime's names and signatures (``load``, ``chat``, ``complete``, ``embed``, ``tokenize``...), so a
caller never asks where a model lives; remote engines and the model library are reached through the
Engine's own methods (``remote_statuses``, ``add_remote``, ``library``), never through the runtime.
The runtime and the remote engines never import each other: both speak the value types of
``engine/types.py``.

Threading: every method may be called from any thread. ``chat`` and ``complete`` return generators
that block between chunks; run them off the GUI thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from .errors import FiresideError, RuntimeFailure
from .library import Library
from .models import LoadOptions, ModelInfo, inspect_file
from .prompts import decode_image
from .protocol import Segments
from .remote import RemoteEndpoint, RemoteEngine, RemoteModel, RemoteStatus
from .runtime import Arrivals, ProgressFn, Runtime, Ticket, Workarounds
from .settings import Settings
from .types import ChatRequest, Chunk, CompletionRequest, Image, LoadedModel


class Engine:
    """The local runtime, the remote engines and the library behind one set of calls.

    ``Engine(settings, **runtime_options)`` starts its own ``Runtime`` (the options are the Runtime's:
    ``resolver``, ``idle_ttl_s``, ``max_queue``, ``runner_command``, ``load_defaults``); tests and
    tools pass their own ``runtime``, ``remotes`` or ``library`` instead.
    """

    def __init__(self, settings: Settings, runtime: Runtime | None = None, *, remotes: RemoteEngine | None = None,
                 library: Library | None = None, **runtime_options):
        self.settings = settings
        self.runtime = runtime if runtime is not None else Runtime(settings, **{"calibrate": settings.attention_calibration, **runtime_options})
        self.remotes = remotes or RemoteEngine(settings)
        self._library = library

    @classmethod
    def of(cls, engine: Engine | Runtime, settings: Settings | None = None) -> Engine:
        """``engine`` itself, or a bare ``Runtime`` wrapped with the settings' remote engines."""
        if isinstance(engine, Engine):
            return engine
        return cls(settings or engine.settings, engine)

    # --- the local runtime's settings ------------------------------------------------------------
    @property
    def idle_ttl_s(self) -> float:
        """How long an idle local model stays loaded (0: forever); new loads take a new value."""
        return self.runtime.idle_ttl_s

    @idle_ttl_s.setter
    def idle_ttl_s(self, seconds: float) -> None:
        self.runtime.idle_ttl_s = seconds

    @property
    def workarounds(self) -> Workarounds:
        """The llama.cpp crash workarounds remembered for this machine (``healing.py``)."""
        return self.runtime.workarounds

    # --- models ----------------------------------------------------------------------------------
    def library(self) -> Library:
        """The model library: the one given, or a fresh view (cheap: the index caches inspections).
        Its methods read the disk: call them off the GUI thread."""
        return self._library if self._library is not None else Library(self.settings)

    def model_info(self, model_id: str) -> ModelInfo:
        """A local model's header (read from its file: call it off the GUI thread)."""
        self._local_only(model_id, "read a header")
        return inspect_file(self.runtime.resolver(model_id))

    def measured_attention(self, info: ModelInfo, threads: int | None = None) -> dict | None:
        """What this machine measured of ``info``'s attention (``runtime/attention.py``; None: not yet), for
        ``threads`` decode threads (None: every core, as a load takes): ``attention.planned`` applies it."""
        return self.runtime.attention.for_model(info, threads)

    def model_path(self, model_id: str) -> Path:
        self._local_only(model_id, "find a file")
        return Path(self.runtime.resolver(model_id))

    # --- images ----------------------------------------------------------------------------------
    @staticmethod
    def decode_image(data: bytes, media_type: str | None = None) -> Image:
        """An image file's bytes (PNG, JPEG, WebP, GIF: its first frame, BMP) as the ``Image`` a chat
        message carries (``image.part()`` beside ``{"type": "text", ...}`` parts); ``ImageRejected`` for
        a corrupt, mislabelled, SVG or oversized file. Decodes: call it off the GUI thread."""
        return decode_image(data, media_type)

    def can_see(self, model_id: str) -> bool:
        """Whether ``model_id`` takes images: a local model with a vision projector paired in the
        library (or loaded with one); a remote model is assumed to (its server says otherwise)."""
        if self.is_remote(model_id):
            return True
        if any(m.model_id == model_id and m.vision for m in self.runtime.loaded()):
            return True
        try:
            return self.runtime.projectors(model_id, Path(self.runtime.resolver(model_id))) is not None
        except (FiresideError, OSError):
            return False

    def vision_models(self) -> list[str]:
        """The library's models that can see images (for a model picker's mark)."""
        return self.runtime.vision_models()

    # --- loading ---------------------------------------------------------------------------------
    def load(self, model_id: str, options: LoadOptions | None = None, *, on_progress: ProgressFn | None = None,
             cancel: threading.Event | None = None, ttl_s: float | None = None, embedding: bool = False) -> LoadedModel:
        """Load ``model_id`` and block until it can answer; a remote model is only checked (its
        remote must list it). See ``Runtime.load``."""
        if self.is_remote(model_id):
            return self.remotes.check(model_id)
        return self.runtime.load(model_id, options, on_progress=on_progress, cancel=cancel, ttl_s=ttl_s,
                                 embedding=embedding)

    def unload(self, model_id: str, *, only_embedding: bool = False) -> bool:
        """Free a local model's memory, or only its copy loaded to embed (a remote model has nothing
        loaded here: False)."""
        return False if self.is_remote(model_id) else self.runtime.unload(model_id, only_embedding=only_embedding)

    def loaded(self) -> list[LoadedModel]:
        return self.runtime.loaded()

    def apply_prompt_cache(self) -> None:
        """Hand the settings' prompt cache choices to the loaded local models now (blocks: a worker)."""
        self.runtime.apply_prompt_cache()

    def is_loaded(self, model_id: str) -> bool:
        """Whether ``model_id`` answers without a load first (a remote model always does)."""
        return self.is_remote(model_id) or self.runtime.is_loaded(model_id)

    def ttl(self, model_id: str, ttl_s: float | None = None) -> float | None:
        return None if self.is_remote(model_id) else self.runtime.ttl(model_id, ttl_s)

    # --- requests --------------------------------------------------------------------------------
    @property
    def arrivals(self) -> Arrivals:
        """The server's tickets for the requests it is preparing (``runtime/arrivals.py``)."""
        return self.runtime.arrivals

    def chat(self, model_id: str, request: ChatRequest, cancel: threading.Event | None = None,
             ttl_s: float | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        """Stream a chat reply (runs on the caller's thread). See ``Runtime.chat``. A generator either way,
        so a remote's errors (an unknown remote, a dead one) arrive when the stream is read, as local ones do."""
        if self.is_remote(model_id):
            if arrival is not None:
                arrival.hand_in()  # it goes to no runner here
            yield from self.remotes.chat(model_id, request, cancel)
        else:
            yield from self.runtime.chat(model_id, request, cancel, ttl_s, arrival)

    def complete(self, model_id: str, request: CompletionRequest, cancel: threading.Event | None = None,
                 ttl_s: float | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        if self.is_remote(model_id):
            if arrival is not None:
                arrival.hand_in()  # it goes to no runner here
            yield from self.remotes.complete(model_id, request, cancel)
        else:
            yield from self.runtime.complete(model_id, request, cancel, ttl_s, arrival)

    def embed(self, model_id: str, inputs: list[str], truncate: bool = False) -> tuple[list[list[float]], int]:
        if self.is_remote(model_id):  # OpenAI's embeddings route has no truncation: the remote decides
            return self.remotes.embed(model_id, inputs)
        return self.runtime.embed(model_id, inputs, truncate)

    def tokenize(self, model_id: str, text: str | Segments) -> list[int]:
        self._local_only(model_id, "tokenize or render prompts")
        return self.runtime.tokenize(model_id, text)

    def chat_tokens(self, model_id: str, request: ChatRequest) -> list[int]:
        self._local_only(model_id, "tokenize or render prompts")
        return self.runtime.chat_tokens(model_id, request)

    def count_chat_tokens(self, model_id: str, request: ChatRequest) -> int:
        return len(self.chat_tokens(model_id, request))

    def prompt_cap(self, model_id: str) -> int:
        """The most characters a prompt for a local model may have (``Runtime.prompt_cap``, loading it); 0 for
        a remote model, whose tokenizer is not known here."""
        return 0 if self.is_remote(model_id) else self.runtime.prompt_cap(model_id)

    def render_prompt(self, model_id: str, request: ChatRequest) -> str:
        self._local_only(model_id, "tokenize or render prompts")
        return self.runtime.render_prompt(model_id, request)

    # --- remote engines --------------------------------------------------------------------------
    def is_remote(self, model_id: object) -> bool:
        """Whether ``model_id`` is served elsewhere: ``remote/NAME/MODEL``, or ``DEVICE/MODEL`` of a paired
        device (reads the device book, a small file: not on the GUI thread)."""
        return self.remotes.owns(model_id)

    def _local_only(self, model_id: str, what: str) -> None:
        if self.is_remote(model_id):
            raise RuntimeFailure(f"{model_id} runs on a remote engine or another device: it cannot {what} here")

    def resolve_remote(self, model_id: str) -> str:
        """``model_id`` once its remote is known; ``ModelNotFound`` otherwise (no network call)."""
        return self.remotes.resolve(model_id)

    def device_for(self, model: str) -> str | None:
        """``DEVICE/MODEL`` of the preferred paired device that serves ``model`` (a bare name this machine's
        library lacks), or None (bounded wait on the devices' lists: call it off the GUI thread)."""
        return self.remotes.device_for(model)

    def remote_statuses(self, fresh: bool = False) -> list[RemoteStatus]:
        """Every remote engine with its models or its error (bounded wait: call it off the GUI thread)."""
        return self.remotes.statuses(fresh=fresh)

    def remote_models(self) -> list[RemoteModel]:
        return self.remotes.models()

    def add_remote(self, name: str, url: str, api_key: str | None = None) -> RemoteEndpoint:
        """Add (or replace) a remote engine; its key goes to the OS keyring (``SecretError`` if none)."""
        return self.remotes.registry.add(name, url, api_key)

    def remove_remote(self, name: str) -> RemoteEndpoint:
        return self.remotes.registry.remove(name)

    def list_remotes(self) -> list[RemoteEndpoint]:
        return self.remotes.registry.list()

    # --- paired devices that lend memory (rpc/) ---------------------------------------------------
    def lending_devices(self) -> list[str]:
        """The paired devices this one uses, most preferred first: those a load may place layers on."""
        return [d.name for d in self.remotes.devices.servers()]

    def lent(self, names: list[str]) -> tuple[list, list[str]]:
        """What each named paired device lends now, as planner devices (``rpc:NAME``), and why any left out
        could not be used (asked of each over its TLS: call it off the GUI thread)."""
        from .rpc import lent_now

        return lent_now(self.remotes.devices, names, skip_gone=True)  # this engine's book; a load asks again

    @property
    def remotes_file(self) -> Path:
        """The file the remote engines are kept in (the app watches it for changes from the CLI)."""
        return Path(self.remotes.registry.path)

    # --- lifetime --------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every local runner and close the remote connections. Idempotent."""
        self.remotes.close()
        self.runtime.close()

