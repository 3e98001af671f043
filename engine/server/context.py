"""What every route works with: the engine, the model library, and the few helpers the dialects share.

``ServerContext`` is built once by ``create_app`` and stored on ``app.state``; routes reach it through
``context(request)``, so nothing lives in module globals and two apps in one process stay apart.
``resolve`` is the one door from a client's model name to the engine: names go through the library
(``Library.get`` refuses anything path-like before looking), so an API client can never make the
runtime open a file by naming it. ``remote/NAME/MODEL`` ids go to the engine's remote engines, and
their models are listed after the library's.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.requests import Request

from ..errors import ModelNotFound
from ..facade import Engine
from ..library.paths import is_path_like
from ..remote import is_remote
from ..settings import Settings
from .security import SecurityPolicy

Puller = Callable[..., Any]  # (name, on_progress=, cancel=) -> LibraryModel


class LibraryLike(Protocol):
    def list(self) -> list[Any]: ...
    def get(self, ref: str) -> Any: ...
    def remove(self, ref: str) -> Any: ...


class ResponseStore:
    """The last few ``/v1/responses`` conversations, so ``previous_response_id`` can continue one."""

    def __init__(self, limit: int = 256):
        self.limit = limit
        self._items: OrderedDict[str, list[dict]] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, response_id: str, messages: list[dict]) -> None:
        with self._lock:
            self._items[response_id] = messages
            while len(self._items) > self.limit:
                self._items.popitem(last=False)

    def get(self, response_id: str) -> list[dict] | None:
        with self._lock:
            return self._items.get(response_id)


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

    def resolve(self, name: str) -> str:
        """The library id the runtime knows ``name`` by; ``ModelNotFound`` for unknown or path-like names."""
        if not isinstance(name, str) or is_path_like(name):
            raise ModelNotFound(f"no model named {name!r} (model ids are names, not paths)")
        if is_remote(name):
            return self.engine.resolve_remote(name)
        return self.library.get(name).id

    def ready(self, name: str) -> str:
        """``resolve`` for a request that runs the model: with just-in-time loading off, a model the
        user has not loaded is refused (404, so clients treat it as unavailable) instead of loaded."""
        model_id = self.resolve(name)
        if not self.jit and not self.engine.is_loaded(model_id):
            raise ModelNotFound(f"{model_id} is not loaded, and this server does not load models on request "
                                "(just-in-time loading is off): load it in Fireside first")
        return model_id

    def models(self) -> list[Any]:
        """Library models, then those of every remote engine that answers (a dead one lists nothing)."""
        return self.library.list() + self.engine.remote_models()

    @property
    def runtime(self) -> Engine:
        """The ``engine`` under the name the dialect modules used before it was one (#15); they are
        being rewritten by another change, so this spares them an edit. New code says ``engine``."""
        return self.engine


def context(request: Request) -> ServerContext:
    return request.app.state.fireside


def new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"
