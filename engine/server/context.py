"""What every route works with: the engine, the model library, and the few helpers the dialects share.

``ServerContext`` is built once by ``create_app`` and stored on ``app.state``; routes reach it through
``context(request)``, so nothing lives in module globals and two apps in one process stay apart.
``resolve`` is the one door from a client's model name to the engine: names go through the library
(``Library.get`` refuses anything path-like before looking), so an API client can never make the
runtime open a file by naming it. ``remote/NAME/MODEL`` ids go to the engine's remote engines, and
their models are listed after the library's.

A name the library answered is remembered for ``RESOLVED_S``, while the model's file is the one the
library saw (one ``os.stat``: its size and modification time), so a client costs one folder scan a
minute rather than one per request, and ``model_for`` answers those on the event loop, with no hop to
a worker thread on the way to the runner (a hop and a scan were 1-6 ms of each request when four
arrived together, and of every turn of a chat paced slower than the 2 s names were first kept for).
An unknown name is always looked up again, so a model that has just arrived answers at once; a model
whose file is deleted or replaced by hand is looked up again on its next request, and one that is gone
answers 404, as for an unknown name (``entry``; the runtime's load, ``ModelNotFound``). The server's
own delete and pull forget every remembered name.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..errors import ModelNotFound
from ..facade import Engine
from ..library import is_path_like
from ..prompts import ImageFile
from ..settings import Settings
from ..types import Image
from .security import SecurityPolicy

Puller = Callable[..., Any]  # (name, on_progress=, cancel=) -> LibraryModel
RESOLVED_S = 60.0  # how long a name the library answered is taken as answered (while its file stays)
RESOLVED_MAX = 256  # names remembered at most (clients choose them)
RESPONSES_MAX_BYTES = 64 * 1024 * 1024  # what the kept /v1/responses conversations may hold in all


class LibraryLike(Protocol):
    def list(self) -> list[Any]: ...
    def get(self, ref: str) -> Any: ...
    def remove(self, ref: str) -> Any: ...


class ResponseStore:
    """The last ``/v1/responses`` conversations, so ``previous_response_id`` can continue one: at most
    ``limit`` of them, holding at most ``max_bytes`` of text. Each keeps its whole conversation, so a
    chain of turns, or a few long prompts, would otherwise keep gigabytes (256 at a context's worth
    each); the oldest go first, and one conversation alone over the budget is not kept (continuing it
    is a 404 ``response_not_found``, as for any forgotten response)."""

    def __init__(self, limit: int = 256, max_bytes: int = RESPONSES_MAX_BYTES):
        self.limit, self.max_bytes = limit, max_bytes
        self.bytes = 0  # what the kept conversations hold, as ``held_bytes`` counts it
        self._items: OrderedDict[str, tuple[list[dict], int]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, response_id: str, messages: list[dict]) -> None:
        size = held_bytes(messages)
        with self._lock:
            old = self._items.pop(response_id, None)
            self.bytes -= old[1] if old else 0
            if size > self.max_bytes:
                return
            self._items[response_id] = (messages, size)
            self.bytes += size
            while len(self._items) > self.limit or self.bytes > self.max_bytes:
                self.bytes -= self._items.popitem(last=False)[1][1]

    def get(self, response_id: str) -> list[dict] | None:
        with self._lock:
            found = self._items.get(response_id)
            return found[0] if found else None


def held_bytes(value: Any) -> int:
    """About how much memory ``value``'s strings and images take (``sys.getsizeof``: O(1) a string; an
    image file's bytes, a decoded image's pixels), walking its lists and dicts; a string two entries
    share counts in each, so this errs high, never low."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += sys.getsizeof(item)
        elif isinstance(item, (bytes, bytearray)):
            total += len(item)
        elif isinstance(item, (Image, ImageFile)):  # a conversation's images are kept with it
            total += len(item.pixels) if isinstance(item, Image) else len(item.data)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
            total += 8 * len(item)
        else:
            total += 32
    return total


def _stamp(path: Path | None) -> tuple | None:
    """What tells a model's file from another (or from none): its size and modification time."""
    try:
        st = os.stat(path) if path is not None else None
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns) if st else None


@dataclass
class ServerContext:
    engine: Engine
    settings: Settings
    library: LibraryLike
    policy: SecurityPolicy
    puller: Puller | None = None
    responses: ResponseStore = field(default_factory=ResponseStore)
    started_at: float = field(default_factory=time.time)
    jit: bool = True  # load a model on its first request; off: only models the user loaded answer
    pairing: Any = None  # the PairingDesk of a server that shares (``--share``), else None
    shared: bool = False  # the shared listener: this machine's own models only, to paired devices
    collections: Any = None  # the knowledge ``Collections`` behind /v1/files and /v1/vector_stores
    # name -> (library id, its file, the file's stamp, when the library said so); plain dict operations,
    # safe from any thread
    _resolved: dict[str, tuple[str, Path | None, tuple | None, float]] = field(default_factory=dict, init=False,
                                                                               repr=False)

    def resolve(self, name: str) -> str:
        """The library id the runtime knows ``name`` by; ``ModelNotFound`` for unknown or path-like names."""
        if not isinstance(name, str) or is_path_like(name):
            raise ModelNotFound(f"no model named {name!r} (model ids are names, not paths)")
        if self.engine.is_remote(name):
            if self.shared:  # a paired device uses this machine's models, never its remotes or devices
                raise ModelNotFound(f"no model named {name!r} on this device")
            return self.engine.resolve_remote(name)
        model_id = self._remembered(name)
        if model_id is None:
            try:
                model = self.library.get(name)
            except ModelNotFound:  # not on this machine: on a paired device, the first in the preferred order
                routed = None if self.shared else self.engine.device_for(name)
                if routed is None:
                    raise
                return routed
            model_id, path = model.id, getattr(model, "path", None)
            if len(self._resolved) >= RESOLVED_MAX:
                self._resolved.clear()
            self._resolved[name] = (model_id, path, _stamp(path), time.monotonic())
        return model_id

    def _remembered(self, name: str) -> str | None:
        hit = self._resolved.get(name)
        if hit is None or time.monotonic() - hit[3] >= RESOLVED_S:
            return None
        model_id, path, stamp, _ = hit
        return model_id if path is None or _stamp(path) == stamp else None

    def forget_names(self) -> None:
        """The library changed here (a delete, a pull): look every name up afresh."""
        self._resolved.clear()

    async def model_for(self, name: str) -> str:
        """``ready(name)`` from a route: on the event loop for a name answered in the last ``RESOLVED_S``,
        on a worker thread otherwise (the library reads the disk)."""
        if isinstance(name, str) and self._remembered(name):  # a path-like name is never remembered
            return self.ready(name)
        return await run_in_threadpool(self.ready, name)

    def ready(self, name: str) -> str:
        """``resolve`` for a request that runs the model: with just-in-time loading off, a model the
        user has not loaded is refused (404, so clients treat it as unavailable) instead of loaded."""
        model_id = self.resolve(name)
        if not self.jit and not self.engine.is_loaded(model_id):
            raise ModelNotFound(f"{model_id} is not loaded, and this server does not load models on request "
                                "(just-in-time loading is off): load it in Fireside first")
        return model_id

    def entry(self, name: str) -> Any:
        """The listed model ``name`` resolves to (for routes that describe a model rather than run it);
        ``ModelNotFound`` when it is not listed, as when its file went from the folder after its name
        was remembered: a model that vanishes between resolve and use is gone (404), never a 500."""
        model_id = self.resolve(name)
        found = [m for m in self.models() if m.id == model_id]
        if not found:
            self.forget_names()
            raise ModelNotFound(f"{model_id} is no longer in the library")
        return found[0]

    def models(self) -> list[Any]:
        """Library models, then those of every remote engine that answers (a dead one lists nothing)."""
        if self.shared:
            return self.library.list()
        return self.library.list() + self.engine.remote_models()


def context(request: Request) -> ServerContext:
    return request.app.state.fireside


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"
