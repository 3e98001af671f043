"""The Hugging Face token: kept in the OS keyring, and sent to the hub's own host and nowhere else.

The token is one entry of the engine's ``SecretStore`` (``engine/secrets.py``), under its one error
policy. Machines without a keyring backend (a bare Linux server, a container) still work for public
repos: reading gives no token, and saving one raises ``HubError`` that says how to get a keyring or to
use ``HF_TOKEN`` for the session instead. A keyring that fails on read (locked) is logged and treated
as no token, so public downloads keep working; saving or removing raises.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from urllib.parse import urlsplit

import httpx

from ..errors import HubError
from ..secrets import SecretStore
from ..settings import redact, secret

log = logging.getLogger(__name__)

SERVICE = "fireside"
USERNAME = "huggingface-token"
TOKENS = SecretStore(SERVICE, HubError, "Hugging Face token", "set HF_TOKEN for this session instead", entry=USERNAME)


def get_token() -> str | None:
    """The saved token, or None (also when no keyring exists, or it cannot be read: public repos
    still work, and the log says why the token was not used)."""
    try:
        return secret(TOKENS.get())
    except HubError as exc:
        log.warning("%s; going on without a token", exc)
        return None


def set_token(token: str) -> None:
    token = token.strip()
    if not token:
        raise HubError("the Hugging Face token is empty")
    TOKENS.set(token)


def delete_token() -> None:
    TOKENS.delete()


def _origin(url: str | httpx.URL) -> tuple[str, str, int | None]:
    parts = urlsplit(str(url))
    port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


class HubAuth(httpx.Auth):
    """Adds the bearer token only to requests for the hub endpoint's origin. httpx drops the header
    itself when a redirect leaves that origin (the hub sends file bytes from a CDN)."""

    def __init__(self, token: str | None, endpoint: str):
        self.token = secret(token)
        self.origin = _origin(endpoint)

    def __repr__(self) -> str:
        return f"HubAuth(token={redact(self.token)!r}, origin={self.origin!r})"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.token and _origin(request.url) == self.origin:
            request.headers["Authorization"] = f"Bearer {self.token}"
        yield request
