"""The server's guard: every request passes these checks before any route sees it.

Every local LLM server has had a CVE here, so the checks run in a plain ASGI middleware in this
order, each answering in the caller's dialect (see ``errors.py``):

1. ``Host`` must be on the allowlist (loopback names, the bind address, the user's extra hosts), so a
   DNS-rebinding page gets 403 whatever it asks for.
2. A browser request (``Origin`` or ``Sec-Fetch-Site: cross-site``) must come from the server's own
   origin or one the user listed; otherwise 403. This refuses "simple" ``text/plain`` POSTs that skip
   CORS preflight. Listed origins get CORS headers and preflight answers.
3. With an API key set, ``Authorization: Bearer KEY`` or ``x-api-key: KEY`` is compared in constant
   time (``hmac.compare_digest``); the key is never logged. Only the docs and ``/`` are open.
4. A request with a body must say ``application/json`` (415 otherwise), and the body may not exceed
   ``max_body_bytes`` (413); it is read here once and replayed to the app.

The API key lives in the OS keyring (``load_api_key``/``save_api_key``); binding to anything but
loopback without a key is refused by ``check_bind``.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ServerError
from .errors import dialect_of, error_body, status_problem

log = logging.getLogger(__name__)

KEYRING_SERVICE = "Fireside"
KEYRING_USER = "api-server-key"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
OPEN_PATHS = ("/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")
DEFAULT_MAX_BODY = 8 * 1024 * 1024

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


@dataclass
class SecurityPolicy:
    """What the server lets in. ``api_key`` None means no key (allowed on loopback only)."""

    api_key: str | None = None
    bind_host: str = "127.0.0.1"
    port: int = 8765
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = DEFAULT_MAX_BODY

    def host_allowed(self, host_header: str) -> bool:
        host = _host_name(host_header)
        if host in LOOPBACK_HOSTS or host in (h.lower() for h in self.allowed_hosts):
            return True
        if is_wildcard(self.bind_host):
            return self.api_key is not None and not self.allowed_hosts  # the key guards a network bind
        return host == self.bind_host.lower().strip("[]")

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in (o.rstrip("/").lower() for o in self.allowed_origins) or "*" in self.allowed_origins:
            return True
        return origin in (f"http://{host_header.lower()}", f"https://{host_header.lower()}")

    def key_matches(self, offered: str | None) -> bool:
        if self.api_key is None:
            return True
        if not offered:
            return False
        return hmac.compare_digest(offered.encode("utf-8"), self.api_key.encode("utf-8"))


def is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to serve the network without a key: anyone on it could otherwise use the models."""
    if not is_loopback(host) and not api_key:
        raise ServerError(f"refusing to listen on {host} without an API key: anyone on the network could "
                          f"use your models. Set one with `fireside serve --api-key KEY` (kept in the OS "
                          f"keyring) or listen on 127.0.0.1")


def _host_name(host_header: str) -> str:
    host = host_header.strip().lower()
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def offered_key(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get("x-api-key")


def load_api_key() -> str | None:
    """The saved API key, or None (also where no OS keyring exists: then no key was ever saved)."""
    import keyring
    from keyring.errors import KeyringError

    try:
        return keyring.get_password(KEYRING_SERVICE, KEYRING_USER)
    except KeyringError as exc:
        log.info("no API key read from the OS keyring: %s", exc)
        return None


def save_api_key(key: str) -> None:
    """Keep the key in the OS keyring; ``ServerError`` says so where there is none."""
    import keyring
    from keyring.errors import KeyringError

    try:
        keyring.set_password(KEYRING_SERVICE, KEYRING_USER, key)
    except KeyringError as exc:
        raise ServerError(f"the API key cannot be kept: no usable OS keyring ({exc}). Pass it with "
                          "--api-key each time, or install and unlock a keyring") from exc


def delete_api_key() -> None:
    import keyring
    from keyring.errors import KeyringError, PasswordDeleteError

    try:
        keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
    except PasswordDeleteError:
        pass
    except KeyringError as exc:
        log.info("no API key to remove from the OS keyring: %s", exc)


class SecurityMiddleware:
    """ASGI middleware applying ``SecurityPolicy`` to every HTTP request before routing."""

    def __init__(self, app: Callable, policy: SecurityPolicy):
        self.app, self.policy = app, policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no route speaks websocket: refuse rather than check
            return await send({"type": "websocket.close", "code": 1008})
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if refusal:
            return await _send_error(send, scope["path"], *refusal)
        origin = headers.get("origin")
        if scope["method"] == "OPTIONS" and origin:
            return await _send_preflight(send, origin, headers)
        if scope["method"] in BODY_METHODS:
            body, problem = await self._read_body(receive, headers)
            if problem:
                return await _send_error(send, scope["path"], *problem)
            receive = _replay(body, receive)
        if origin:
            send = _with_cors(send, origin)
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        policy, host = self.policy, headers.get("host", "")
        if not policy.host_allowed(host):
            return 403, f"host {host!r} is not allowed (DNS rebinding protection); add it to the allowed hosts", "host_not_allowed"
        origin = headers.get("origin")
        if origin is not None and not policy.origin_allowed(origin, host):
            return 403, f"cross-origin requests from {origin} are not allowed; add it to the allowed origins", "origin_not_allowed"
        if origin is None and headers.get("sec-fetch-site") == "cross-site":
            return 403, "cross-site browser requests are not allowed", "origin_not_allowed"
        if scope["method"] == "OPTIONS" or scope["path"] in OPEN_PATHS:
            return None
        if not policy.key_matches(offered_key(headers)):
            return 401, "missing or wrong API key: send it as `Authorization: Bearer KEY` or `x-api-key: KEY`", "invalid_api_key"
        return None

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> tuple[bytes, tuple | None]:
        limit = self.policy.max_body_bytes
        too_big = (413, f"the request body is larger than the {limit:,}-byte limit", "request_too_large")
        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return b"", too_big
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                return b"", too_big
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        ctype = headers.get("content-type", "").split(";")[0].strip().lower()
        if body and not (ctype == "application/json" or ctype.endswith("+json")):
            return b"", (415, f"the body must be JSON (Content-Type: application/json), not {ctype or 'untyped'}",
                         "unsupported_media_type")
        return body, None


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as the server would

    return replay


def _with_cors(send: Send, origin: str) -> Send:
    async def cors_send(message: dict) -> None:
        if message["type"] == "http.response.start":
            message = dict(message, headers=[*message.get("headers", []),
                                             (b"access-control-allow-origin", origin.encode("latin-1")),
                                             (b"vary", b"Origin")])
        await send(message)

    return cors_send


async def _send_preflight(send: Send, origin: str, headers: dict[str, str]) -> None:
    asked = headers.get("access-control-request-headers", "authorization, content-type, x-api-key")
    raw = [(b"access-control-allow-origin", origin.encode("latin-1")),
           (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
           (b"access-control-allow-headers", asked.encode("latin-1")),
           (b"access-control-max-age", b"600"), (b"vary", b"Origin"), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": raw})
    await send({"type": "http.response.body", "body": b""})


async def _send_error(send: Send, path: str, status: int, message: str, code: str) -> None:
    body = json.dumps(error_body(dialect_of(path), status_problem(status, message, code))).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        raw.append((b"www-authenticate", b'Bearer realm="fireside"'))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
