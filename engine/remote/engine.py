"""``RemoteEngine``: the runtime's door to every remote engine, under ids that never meet local ones.

A remote model's id is ``remote/NAME/MODEL``: the remote's name as the user added it, then the id the
remote itself uses (which may hold slashes, as ``meta-llama/Llama-3.1-8B-Instruct`` does). The
runtime sends every ``remote/`` id here; everything else stays local. The ``remote/`` namespace is
reserved: a local model would have to sit in a models folder named ``remote`` to share the prefix,
and the runtime would still route its id here.

Paired devices (``engine/devices``, ``fireside devices pair``) are remotes too, under ``DEVICE/MODEL``
ids (no ``remote/`` prefix: a device name never holds a dot or a slash, and ``remote`` is not one):
their endpoints come from the device book, over TLS that trusts only the certificate pinned at
pairing, with the pairing's token as the key. ``owns`` says whether an id is a remote's or a device's;
``device_for`` picks the preferred device that serves a model named without one. A device that cannot
be reached at its recorded address (no connection made: nothing of the request was answered) is
looked for on the local network by its pinned certificate (``devices/relocate.py``, bounded and rate
limited), and the request is sent once more where it is found.

Model lists are asked of every remote at once, each bounded by a short timeout, and kept for a
little while (a failure for less), so listing models never waits long on a dead remote, and a dead
remote simply lists nothing. Threading: every method may be called from any thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from ..devices import SERVER, DeviceBook, Relocator
from ..errors import DeviceError, ModelNotFound, RemoteUnreachable
from ..settings import Settings
from ..types import ChatRequest, Chunk, CompletionRequest, LoadedModel
from .client import LIST_TIMEOUT_S, RemoteClient
from .registry import RemoteEndpoint, RemoteError, RemoteRegistry

log = logging.getLogger(__name__)
PREFIX = "remote/"
LIST_TTL_S = 30.0
FAILED_TTL_S = 10.0


def is_remote(model_id: object) -> bool:
    return isinstance(model_id, str) and model_id.startswith(PREFIX)


def remote_id(name: str, model: str) -> str:
    return f"{PREFIX}{name}/{model}"


def split_id(model_id: str) -> tuple[str, str]:
    """``(remote name, the remote's model id)`` of a ``remote/NAME/MODEL`` id."""
    name, _, model = model_id.removeprefix(PREFIX).partition("/")
    if not name or not model:
        raise ModelNotFound(f"{model_id!r} is not a remote model id: they look like remote/NAME/MODEL")
    return name, model


@dataclass
class DeviceEndpoint(RemoteEndpoint):
    """A paired device, as a remote: its TLS must present ``cert_pem`` (fingerprint ``fingerprint``)."""

    cert_pem: str = ""
    fingerprint: str = ""

    def model_id(self, model: str) -> str:
        return f"{self.name}/{model}"


def _model_id(endpoint: RemoteEndpoint, model: str) -> str:
    return endpoint.model_id(model) if isinstance(endpoint, DeviceEndpoint) else remote_id(endpoint.name, model)


@dataclass
class RemoteInfo:
    """The little a remote says about a model, in the shape the server's model lists read."""

    architecture: str = "remote"
    parameter_count: int = 0
    chat_template: str = ""
    metadata: dict = field(default_factory=dict)
    embeds_only: bool = False  # a remote does not say: its models are taken to chat


@dataclass
class RemoteModel:
    """A remote model, shaped like a library model for the server's lists (no file, no size)."""

    id: str
    remote: str
    remote_model: str
    base_url: str
    added_at: float = 0.0
    aliases: list[str] = field(default_factory=list)
    size: int = 0
    sha256: str | None = None
    quant: str = "remote"
    info: RemoteInfo = field(default_factory=RemoteInfo)
    kind: str = "remote"  # or "device": a paired device's model
    projector: None = None  # whether it sees images is the remote's to say, per request

    @property
    def source(self) -> str:
        return f"{self.kind}:{self.remote}"


@dataclass
class RemoteStatus:
    endpoint: RemoteEndpoint
    models: list[RemoteModel]
    error: str = ""
    checked_at: float = 0.0


class RemoteEngine:
    def __init__(self, settings: Settings, registry: RemoteRegistry | None = None, devices: DeviceBook | None = None,
                 relocator: Relocator | None = None):
        self.registry = registry or RemoteRegistry(settings)
        self.devices = devices or DeviceBook(settings)
        self.relocator = relocator or Relocator(self.devices)
        self._clients: dict[str, tuple[RemoteEndpoint, RemoteClient]] = {}  # "remote/NAME" or "NAME/" (a device)
        self._statuses: dict[str, RemoteStatus] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="fireside-remote-list")

    def client(self, name: str) -> RemoteClient:
        return self._client(self.registry.get(name))

    def _client(self, endpoint: RemoteEndpoint) -> RemoteClient:
        key = _key(endpoint)
        with self._lock:
            known = self._clients.get(key)
            if known and known[0] == endpoint:
                return known[1]
        if isinstance(endpoint, DeviceEndpoint):
            client = RemoteClient(endpoint, self.devices.token(self.devices.get(endpoint.name, SERVER)),
                                  pinned_pem=endpoint.cert_pem)
        else:
            client = RemoteClient(endpoint, self.registry.api_key(endpoint))
        with self._lock:
            old = self._clients.pop(key, None)
            self._clients[key] = (endpoint, client)
        if old:
            old[1].close()
        return client

    # --- paired devices --------------------------------------------------------------------------
    def device_endpoints(self) -> list[DeviceEndpoint]:
        """The devices this one has paired with, as remotes (none when the book cannot be read)."""
        try:
            devices = self.devices.servers()  # a stat, unless the book changed: this runs several times a request
        except DeviceError as exc:
            log.warning("%s", exc)
            return []
        return [DeviceEndpoint(d.name, d.base_url, True, d.cert_pem, d.fingerprint) for d in devices]

    def device_for(self, model: str) -> str | None:
        """``DEVICE/MODEL`` of the first paired device, in the preferred order (``DeviceBook.order``), whose
        last model list names ``model``; None when none does (or none is paired: then nothing is asked)."""
        if not isinstance(model, str) or not self.device_endpoints():
            return None
        for status in self.statuses():
            if isinstance(status.endpoint, DeviceEndpoint) and not status.error:
                if any(m.remote_model == model for m in status.models):
                    return status.endpoint.model_id(model)
        return None

    def owns(self, model_id: object) -> bool:
        """Whether ``model_id`` is served elsewhere: ``remote/NAME/MODEL``, or ``DEVICE/MODEL`` of a paired device."""
        if is_remote(model_id):
            return True
        if not isinstance(model_id, str) or "/" not in model_id:
            return False
        return self._device(model_id.partition("/")[0]) is not None

    def _device(self, name: str) -> DeviceEndpoint | None:
        return next((e for e in self.device_endpoints() if e.name == name), None)

    def _route(self, model_id: str) -> tuple[RemoteClient, str]:
        """The client that serves ``model_id`` and the id its server knows the model by."""
        if is_remote(model_id):
            name, model = split_id(model_id)
            return self.client(name), model
        name, _, model = model_id.partition("/")
        device = self._device(name)
        if device is None or not model:
            raise ModelNotFound(f"no paired device named {name!r} serves {model_id!r}")
        return self._client(device), model

    def _found_again(self, model_id: str, exc: RemoteUnreachable, failed: RemoteClient) -> tuple[RemoteClient, str]:
        """After ``model_id``'s device could not be reached: its client where it is found again by its
        certificate (the book updated), or ``exc`` again, saying why not (a remote engine is not looked for)."""
        if is_remote(model_id):
            raise exc
        self._relocate(model_id.partition("/")[0], exc, failed.endpoint.base_url)
        return self._route(model_id)

    def _relocate(self, name: str, exc: RemoteUnreachable, failed_url: str) -> DeviceEndpoint:
        try:
            device = self.devices.get(name, SERVER)
            moved = device if device.base_url != failed_url else self.relocator.find(device)  # else: moved meanwhile
        except DeviceError as why:
            raise RemoteUnreachable(f"{exc}; looked for it on the local network: {why}") from None
        return DeviceEndpoint(moved.name, moved.base_url, True, moved.cert_pem, moved.fingerprint)

    def _once_more(self, model_id: str, call):
        """``call(client, model)``, and once more where the device is found again if it could not be reached."""
        client, model = self._route(model_id)
        try:
            return call(client, model)
        except RemoteUnreachable as exc:
            return call(*self._found_again(model_id, exc, client))

    def _stream_once_more(self, model_id: str, start) -> Iterator[Chunk]:
        """The stream ``start(client, model)``, started once more where the device is found again if no
        connection could be made (then nothing was sent to it, and nothing yielded yet)."""
        client, model = self._route(model_id)
        sent = False
        try:
            for chunk in start(client, model):
                sent = True
                yield chunk
        except RemoteUnreachable as exc:
            if sent:
                raise
            yield from start(*self._found_again(model_id, exc, client))

    # --- listing ---------------------------------------------------------------------------------
    def statuses(self, fresh: bool = False) -> list[RemoteStatus]:
        """Every remote with its models or its error; asks those not asked lately, all at once, and
        waits at most a few seconds. Never raises for a remote that fails."""
        try:
            endpoints = self.registry.list()
        except RemoteError as exc:
            log.warning("%s", exc)
            endpoints = []
        endpoints = [*endpoints, *self.device_endpoints()]
        now = time.monotonic()
        stale = [e for e in endpoints if fresh or self._stale(e, now)]
        futures = {self._pool.submit(self._ask, e): e for e in stale}
        wait(futures, timeout=LIST_TIMEOUT_S + 1.0)
        for future, endpoint in futures.items():
            if not future.done():  # still waiting: report it as slow now; its answer lands later
                self._remember(RemoteStatus(endpoint, [], "did not answer in time", now))
        with self._lock:
            return [self._statuses.get(_key(e)) or RemoteStatus(e, [], "not asked yet") for e in endpoints]

    def _stale(self, endpoint: RemoteEndpoint, now: float) -> bool:
        with self._lock:
            status = self._statuses.get(_key(endpoint))
        if status is None or status.endpoint != endpoint:
            return True
        return now - status.checked_at > (FAILED_TTL_S if status.error else LIST_TTL_S)

    def _ask(self, endpoint: RemoteEndpoint) -> None:
        try:
            try:
                entries = self._client(endpoint).list_models()
            except RemoteUnreachable as exc:
                if not isinstance(endpoint, DeviceEndpoint):
                    raise
                endpoint = self._relocate(endpoint.name, exc, endpoint.base_url)
                entries = self._client(endpoint).list_models()
            kind = "device" if isinstance(endpoint, DeviceEndpoint) else "remote"
            models = [RemoteModel(_model_id(endpoint, m["id"]), endpoint.name, m["id"], endpoint.base_url,
                                  float(m.get("created") or 0), kind=kind) for m in entries]
            status = RemoteStatus(endpoint, models, "", time.monotonic())
        except Exception as exc:  # any failure is this remote's status, never the caller's problem
            status = RemoteStatus(endpoint, [], str(exc), time.monotonic())
        self._remember(status)

    def _remember(self, status: RemoteStatus) -> None:
        with self._lock:
            self._statuses[_key(status.endpoint)] = status

    def models(self) -> list[RemoteModel]:
        """The models of every remote that answers (bounded wait; dead remotes list nothing)."""
        return [m for s in self.statuses() for m in s.models]

    # --- requests --------------------------------------------------------------------------------
    def resolve(self, model_id: str) -> str:
        """``model_id`` itself once its remote is known; ``ModelNotFound``/``RemoteError`` otherwise."""
        if not is_remote(model_id):
            self._route(model_id)  # a paired device: known, or ModelNotFound
            return model_id
        name, _ = split_id(model_id)
        try:
            self.registry.get(name)
        except RemoteError as exc:  # to an API client, an unknown remote is an unknown model
            raise ModelNotFound(str(exc)) from None
        return model_id

    def check(self, model_id: str) -> LoadedModel:
        """What ``Runtime.load`` returns for a remote model: asks the remote that it serves the model."""
        _, model = self._route(model_id)
        client, listed = self._once_more(model_id, lambda c, m: (c, c.list_models()))
        if model not in {m["id"] for m in listed}:
            raise ModelNotFound(f"remote engine {client.endpoint.name!r} does not list a model {model!r}")
        return LoadedModel(model_id=model_id, path=client.endpoint.base_url, pid=0, n_ctx=0, n_gpu_layers=0,
                           n_layers=0, verdict="remote", planned_ram_bytes=0, planned_gpu_bytes=0,
                           loaded_at=time.time(), last_used=time.time(),
                           notes=[f"served by {client.endpoint.base_url}"])

    def chat(self, model_id: str, request: ChatRequest, cancel: threading.Event | None = None) -> Iterator[Chunk]:
        self._route(model_id)  # an unknown id fails here, not when the stream is first read
        return self._stream_once_more(model_id, lambda c, m: c.chat(m, request, cancel))

    def complete(self, model_id: str, request: CompletionRequest,
                 cancel: threading.Event | None = None) -> Iterator[Chunk]:
        self._route(model_id)
        return self._stream_once_more(model_id, lambda c, m: c.complete(m, request, cancel))

    def embed(self, model_id: str, inputs: list[str]) -> tuple[list[list[float]], int]:
        return self._once_more(model_id, lambda c, m: c.embed(m, inputs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for _, client in clients:
            client.close()


def _key(endpoint: RemoteEndpoint) -> str:
    """Remotes and devices may share a name: their clients and statuses are kept apart."""
    return f"{endpoint.name}/" if isinstance(endpoint, DeviceEndpoint) else f"remote/{endpoint.name}"
