"""The API server's key in the OS keyring: one entry of the engine's ``SecretStore`` (``secrets.py``).

It lives outside ``engine/server`` on purpose: importing the server package imports FastAPI, and
pydantic's set-up then holds the interpreter for tens of milliseconds at a time. The desktop app reads
the saved key when it starts, on a worker; were the key reached through the server package, that
worker's import would stall the GUI thread just after the window appears (measured: a 35-70 ms pause
against 10-20 ms without it). ``server/security.py`` checks a key; this module only keeps one.
"""

from __future__ import annotations

import logging

from .errors import ServerError
from .secrets import SecretStore

log = logging.getLogger(__name__)

KEYRING_SERVICE = "Fireside"
KEYRING_USER = "api-server-key"
API_KEYS = SecretStore(KEYRING_SERVICE, ServerError, "API key", "pass it with --api-key each time",
                       entry=KEYRING_USER)


def load_api_key() -> str | None:
    """The saved API key, or None: none saved, no OS keyring (then none was ever saved), or a keyring
    that cannot be read now (logged; the server then starts without the saved key)."""
    try:
        return API_KEYS.get()
    except ServerError as exc:
        log.warning("%s; starting without the saved key", exc)
        return None


def save_api_key(key: str) -> None:
    """Keep the key in the OS keyring; ``ServerError`` says so where there is none."""
    API_KEYS.set(key)


def delete_api_key() -> None:
    """Forget the saved key (nothing to forget without a keyring); ``ServerError`` if the keyring fails."""
    API_KEYS.delete()
