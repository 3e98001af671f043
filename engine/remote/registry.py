"""The remote engines a user has added: a name, an OpenAI-compatible base URL, and maybe an API key.

The list lives in ``remotes.json`` in the config folder (written whole, atomically, so a crash never
leaves half a file); each key lives in the OS keyring under the service ``Fireside remote engines``
and the remote's name, never in the file. A name is a short slug (letters, digits, ``.``, ``_``,
``-``), so ``remote/NAME/MODEL`` ids split without ambiguity. Thread-safe; the file is re-read on
every call, so a ``fireside remote add`` shows up in a running server.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import RemoteError
from ..fsutil import atomic_write
from ..secrets import SecretStore
from ..settings import Settings

KEYRING_SERVICE = "Fireside remote engines"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


@dataclass
class RemoteEndpoint:
    name: str
    base_url: str  # without a trailing slash or /v1
    has_key: bool = False


class KeyringStore(SecretStore):
    """Remote keys in the OS keyring, one entry per remote name, under ``secrets.py``'s error policy."""

    def __init__(self):
        super().__init__(KEYRING_SERVICE, RemoteError, "key of remote engine", "add the remote without --api-key")


def normalize_url(url: str) -> str:
    """``url`` without a trailing slash or ``/v1``; ``RemoteError`` unless it is an http(s) URL."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"{url!r} is not an http:// or https:// URL")
    return url.strip().rstrip("/").removesuffix("/v1").rstrip("/")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise RemoteError(f"{name!r} is not a usable remote name: use letters, digits, '.', '_' or '-' "
                          f"(at most 63), starting with a letter or digit")
    return name


class RemoteRegistry:
    """The remotes file plus the key store (``KeyringStore`` unless a test passes its own)."""

    def __init__(self, settings: Settings, keys: KeyringStore | None = None):
        self.path = Path(settings.config_dir) / "remotes.json"
        self.keys = keys or KeyringStore()
        self._lock = threading.Lock()

    def list(self) -> list[RemoteEndpoint]:
        with self._lock:
            return self._read()

    def get(self, name: str) -> RemoteEndpoint:
        for endpoint in self.list():
            if endpoint.name == name:
                return endpoint
        raise RemoteError(f"no remote engine named {name!r}: `fireside remote ls` lists them, "
                          f"`fireside remote add NAME URL` adds one")

    def add(self, name: str, url: str, api_key: str | None = None) -> RemoteEndpoint:
        """Add (or replace) a remote; its key, if given, goes to the OS keyring."""
        endpoint = RemoteEndpoint(check_name(name), normalize_url(url), bool(api_key))
        if api_key:
            self.keys.set(name, api_key)
        with self._lock:
            endpoints = [e for e in self._read() if e.name != name] + [endpoint]
            self._write(endpoints)
        if not api_key:
            self.keys.delete(name)
        return endpoint

    def api_key(self, endpoint: RemoteEndpoint) -> str | None:
        """The remote's key (the key store is only asked when one was stored)."""
        return self.keys.get(endpoint.name) if endpoint.has_key else None

    def remove(self, name: str) -> RemoteEndpoint:
        with self._lock:
            endpoints = self._read()
            found = next((e for e in endpoints if e.name == name), None)
            if found is None:
                raise RemoteError(f"no remote engine named {name!r}")
            self._write([e for e in endpoints if e.name != name])
        if found.has_key:
            self.keys.delete(name)
        return found

    def _read(self) -> list[RemoteEndpoint]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise RemoteError(f"{self.path} cannot be read ({exc}); fix or delete it") from None
        return [RemoteEndpoint(str(e["name"]), str(e["base_url"]), bool(e.get("has_key")))
                for e in raw.get("remotes", []) if isinstance(e, dict) and "name" in e and "base_url" in e]

    def _write(self, endpoints: list[RemoteEndpoint]) -> None:
        atomic_write(self.path, json.dumps({"remotes": [asdict(e) for e in endpoints]}, indent=2) + "\n")

