"""The server's guard: every request passes these checks before any route sees it.

Every local LLM server has had a CVE here, so the checks run in a plain ASGI middleware in this
order, each answering in the caller's dialect (see ``errors.py``); the rules themselves are data in
``policy.py``:

1. ``Host`` must be well formed and name this machine (see ``policy.py``), so a DNS-rebinding page
   gets 403 whatever it asks for.
2. A browser request (``Origin`` or ``Sec-Fetch-Site: cross-site``) must come from the server's own
   origin or one the user listed; otherwise 403. Listed origins get CORS headers and preflight answers.
3. With an API key set, ``Authorization: Bearer KEY`` or ``x-api-key: KEY`` is compared in constant
   time (``hmac.compare_digest``); the key is never logged. Only the docs and ``/`` are open. On the
   shared listener (``--share``) the key must be a paired device's token instead, and only the
   pairing routes are open (``policy.device_of``, ``policy.open_paths``); there, every answer to a
   request without a paired device's token (a refusal, a pairing step) closes its connection, so
   only paired devices' connections are kept open between requests (``devices.identity.LINK_IDLE_S``).
4. Model management (``/api/pull``, ``/api/delete``, ...) answers 403 unless the policy allows it.
5. A request with both ``Content-Length`` and ``Transfer-Encoding`` is refused (400, checked before
   anything else: the two framings could disagree, which is how requests are smuggled past
   proxies); a body may not exceed
   ``max_body_bytes`` (413); it is read here once and replayed to the app.
6. A body must be JSON. A browser-like request (one with an ``Origin``, or a ``Sec-Fetch-Site`` other
   than ``same-origin``/``none``) must also say ``application/json`` (415 otherwise): only such a
   request could be a "simple" cross-site POST that skips CORS preflight. Other clients (curl's
   ``-d`` sends ``application/x-www-form-urlencoded``) may send JSON under any type, as with Ollama.
   Either way the JSON must be strict (``validation.json_problem``: finite numbers, valid Unicode,
   bounded depth), else 400 naming the field. The one exception is a file upload (``POST /v1/files``
   as ``multipart/form-data``): it streams through unbuffered, to the route's parser (which spools it
   to disk), capped at ``max_upload_bytes`` (413: by ``Content-Length`` before it starts, by count as
   it comes). A browser page can send such a body without preflight, but it carries an ``Origin``,
   so check 2 has already refused any page the user did not allow.

The API key is kept in the OS keyring by ``engine/apikey.py`` (outside this package, so reading it
does not import FastAPI); binding to anything but loopback without a key is refused by ``check_bind``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .errors import ApiError, dialect_of, error_body, error_headers, status_problem
from .policy import (
    DEFAULT_MAX_BODY,
    LOOPBACK_HOSTS,
    MANAGEMENT_PATHS,
    UPLOAD_PATHS,
    SecurityPolicy,
    check_bind,
    is_loopback,
    is_wildcard,
    offered_key,
)
from .validation import json_problem

__all__ = ["DEFAULT_MAX_BODY", "LOOPBACK_HOSTS", "SecurityMiddleware", "SecurityPolicy", "check_bind",
           "is_loopback", "is_wildcard"]
log = logging.getLogger(__name__)

OPEN_PATHS = ("/", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json")
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]
Refusal = tuple[int, str, str]


class SecurityMiddleware:
    """ASGI middleware applying ``SecurityPolicy`` to every HTTP request before routing."""

    def __init__(self, app: Callable, policy: SecurityPolicy, websocket: Callable | None = None):
        self.app, self.policy, self.websocket = app, policy, websocket

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # only a lending device's RPC tunnel speaks websocket, after the checks
            return await self._websocket(scope, receive, send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = self._refusal(scope, headers)
        if self.policy.device_of is not None and (refusal or scope["path"] in self._open_paths()):
            send = _closing(send)  # not a paired device's request: its connection is not kept for another
        if refusal:
            return await _send_error(send, scope["path"], *refusal)
        origin = headers.get("origin")
        if scope["method"] == "OPTIONS" and origin:
            return await _send_preflight(send, origin, headers)
        if scope["method"] == "POST" and scope["path"] in UPLOAD_PATHS and _multipart(headers):
            declared = headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > self.policy.max_upload_bytes:
                return await _send_error(send, scope["path"], 413, _upload_too_large(self.policy), "request_too_large")
            receive = _capped(receive, self.policy)
        elif scope["method"] in BODY_METHODS:
            body, problem = await self._read_body(receive, headers)
            if problem:
                return await _send_error(send, scope["path"], *problem)
            receive = _replay(body, receive)
            if body and not _json_type(headers):  # a non-browser client's JSON under curl's type
                scope = dict(scope, headers=[*_without(scope["headers"], b"content-type"),
                                             (b"content-type", b"application/json")])
        if origin:
            send = _with_cors(send, origin)
        await self.app(scope, receive, send)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The RPC tunnel (``rpc/tunnel.py``) on a shared listener that lends memory, for a paired device's
        token only (the host checks too); every other websocket is refused before its handshake."""
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        device_of, offered = self.policy.device_of, offered_key(headers)
        if self.websocket is None or device_of is None or scope["path"] != self.websocket.path \
                or self._refusal(dict(scope, method="GET"), headers):
            return await send({"type": "websocket.close", "code": 1008})
        device = device_of(offered)
        await self.websocket(receive, send, lambda: device_of(offered) == device)

    def _open_paths(self) -> tuple[str, ...]:
        return OPEN_PATHS if self.policy.open_paths is None else self.policy.open_paths

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Refusal | None:
        policy, host = self.policy, headers.get("host", "")
        if "transfer-encoding" in headers and "content-length" in headers:
            return 400, "a request may not carry both Content-Length and Transfer-Encoding", "ambiguous_framing"
        if not policy.host_allowed(host, (scope.get("server") or (None,))[0]):
            return 403, f"host {host!r} is not allowed (DNS rebinding protection); add it to the allowed hosts", "host_not_allowed"
        origin = headers.get("origin")
        if origin is not None and not policy.origin_allowed(origin, host):
            return 403, f"cross-origin requests from {origin} are not allowed; add it to the allowed origins", "origin_not_allowed"
        if origin is None and headers.get("sec-fetch-site") == "cross-site":
            return 403, "cross-site browser requests are not allowed", "origin_not_allowed"
        if (scope["method"] == "OPTIONS" and policy.device_of is None) or scope["path"] in self._open_paths():
            return None
        if not policy.key_matches(offered_key(headers)):
            if policy.device_of is not None:
                return 401, "this device is not paired (or was revoked): pair with `fireside devices pair`", "device_not_paired"
            return 401, "missing or wrong API key: send it as `Authorization: Bearer KEY` or `x-api-key: KEY`", "invalid_api_key"
        if scope["path"].rstrip("/") in MANAGEMENT_PATHS and not policy.allow_management:
            return 403, ("model management (pull, delete) is off on this server's API; start it with "
                         "`fireside serve --allow-management` to allow it"), "management_disabled"
        return None

    async def _read_body(self, receive: Receive, headers: dict[str, str]) -> tuple[bytes, Refusal | None]:
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
        if not body:
            return body, None
        if not _json_type(headers) and _browser_like(headers):
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            return b"", (415, f"the body must be JSON (Content-Type: application/json), not {ctype or 'untyped'}",
                         "unsupported_media_type")
        if problem := json_problem(body):
            return b"", (400, str(problem), "invalid_json")
        return body, None


def _multipart(headers: dict[str, str]) -> bool:
    return headers.get("content-type", "").split(";")[0].strip().lower() == "multipart/form-data"


def _upload_too_large(policy: SecurityPolicy) -> str:
    return f"the upload is larger than the {policy.max_upload_bytes:,}-byte limit"


def _capped(receive: Receive, policy: SecurityPolicy) -> Receive:
    """``receive`` that raises a 413 once the body passes the upload cap (the route's parser is reading it)."""
    seen = 0

    async def capped() -> dict:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > policy.max_upload_bytes:
            raise ApiError(_upload_too_large(policy), 413, "request_too_large")
        return message

    return capped


def _json_type(headers: dict[str, str]) -> bool:
    ctype = headers.get("content-type", "").split(";")[0].strip().lower()
    return ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json"))


def _browser_like(headers: dict[str, str]) -> bool:
    """Whether a browser could have sent this (fetch and forms send Origin or Sec-Fetch-Site)."""
    return "origin" in headers or headers.get("sec-fetch-site", "none") not in ("same-origin", "none")


def _without(raw: list[tuple[bytes, bytes]], name: bytes) -> list[tuple[bytes, bytes]]:
    return [(k, v) for k, v in raw if k.lower() != name]


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: wait for the disconnect, as the server would

    return replay


def _closing(send: Send) -> Send:
    async def closing_send(message: dict) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*_without(list(message.get("headers") or []), b"connection"),
                                              (b"connection", b"close")]}
        await send(message)

    return closing_send


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
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
           *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in error_headers(status).items())]
    if status == 401:
        raw.append((b"www-authenticate", b'Bearer realm="fireside"'))
    if code == "ambiguous_framing":  # where this body ends is anyone's guess: start afresh
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
