"""The Hugging Face token: kept in the OS keyring, and sent to the hub's own host and nowhere else.

Machines without a keyring backend (a bare Linux server, a container) still work for public repos:
reading gives no token, and saving one raises ``HubError`` that says how to get a keyring or to use
``HF_TOKEN`` for the session instead.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from urllib.parse import urlsplit

import httpx
import keyring
from keyring.errors import KeyringError, NoKeyringError, PasswordDeleteError

from ..errors import HubError
from ..settings import redact, secret

log = logging.getLogger(__name__)

SERVICE = "fireside"
USERNAME = "huggingface-token"
NO_KEYRING = ("no OS keyring is available to keep the Hugging Face token (install and unlock one, e.g. "
              "GNOME Keyring or KWallet on Linux, or set HF_TOKEN for this session instead)")


def get_token() -> str | None:
    """The saved token, or None (also when no keyring backend exists: public repos still work)."""
    try:
        return secret(keyring.get_password(SERVICE, USERNAME) or None)
    except NoKeyringError:
        log.info(NO_KEYRING)
        return None
    except KeyringError as exc:
        log.warning("could not read the Hugging Face token from the keyring: %s", exc)
        return None


def set_token(token: str) -> None:
    token = token.strip()
    if not token:
        raise HubError("the Hugging Face token is empty")
    try:
        keyring.set_password(SERVICE, USERNAME, token)
    except NoKeyringError as exc:
        raise HubError(NO_KEYRING) from exc
    except KeyringError as exc:
        raise HubError(f"could not save the Hugging Face token in the keyring: {exc}") from exc


def delete_token() -> None:
    try:
        keyring.delete_password(SERVICE, USERNAME)
    except PasswordDeleteError:
        pass
    except NoKeyringError as exc:
        raise HubError(NO_KEYRING) from exc


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
