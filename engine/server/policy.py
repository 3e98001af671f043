"""Who may call the server, as data: ``SecurityPolicy`` and the rules it applies to a request's
``Host``, ``Origin`` and key. The middleware in ``security.py`` enforces it.

Host rules (DNS-rebinding protection): a request's ``Host`` must be well formed (a name, an IPv4
address or a bracketed IPv6 address, then at most ``:port``; ``[::1]evil`` is malformed) and name
this machine: a loopback name, the bind address, the user's allowed hosts, and, when listening on
every interface (``0.0.0.0``/``::``), the machine's own host name (also with ``.local``) or the very
address the connection arrived on. A page on ``attacker.example`` that rebinds its name to this
machine still sends ``Host: attacker.example`` and is refused, key or no key.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ServerError

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_MAX_UPLOAD = 512 * 1024 * 1024  # a multipart upload to /v1/files (OpenAI's own cap on one file)
# Routes whose POST body is a multipart file upload rather than JSON (``max_upload_bytes`` caps it).
UPLOAD_PATHS = ("/v1/files",)
# Routes that change what is on disk: off unless the user turns them on (``--allow-management``).
MANAGEMENT_PATHS = ("/api/pull", "/api/delete", "/api/create", "/api/copy", "/api/push")
_NAME_RE = re.compile(r"^[a-z0-9_]([a-z0-9_.-]{0,252})?$")
_HOST_RE = re.compile(r"^(?:\[(?P<v6>[0-9a-f:.%]+)\]|(?P<name>[^:\[\]]+))(?::(?P<port>\d{1,5}))?$")


@dataclass
class SecurityPolicy:
    """What the server lets in. ``api_key`` None means no key (allowed on loopback only);
    ``allow_management`` opens the model-management routes (pull, delete, ...); ``allow_image_urls``
    lets it fetch images clients name by http(s) URL.

    ``device_of`` makes this the shared listener's policy (``fireside serve --share``): a request must
    carry a paired device's token (``device_of(token)`` names the device, ``DeviceBook.client_for``);
    the API key counts for nothing there, and only the pairing routes are open (``open_paths``)."""

    api_key: str | None = None
    bind_host: str = "127.0.0.1"
    port: int = 8765
    allowed_hosts: list[str] = field(default_factory=list)
    allowed_origins: list[str] = field(default_factory=list)
    max_body_bytes: int = DEFAULT_MAX_BODY
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD
    allow_management: bool = False
    allow_image_urls: bool = False  # fetch the http(s) image URLs clients name (imagelinks.py)
    device_of: Callable[[str | None], str | None] | None = None
    open_paths: tuple[str, ...] | None = None  # None: the docs and ``/`` (security.OPEN_PATHS)

    def host_allowed(self, host_header: str, local_address: str | None = None) -> bool:
        """Whether ``Host: host_header`` names this server; ``local_address`` is the address the
        connection arrived on (ASGI's ``scope["server"][0]``)."""
        host = host_name(host_header)
        if host is None:
            return False
        if host in LOOPBACK_HOSTS or host in (h.lower().strip("[]") for h in self.allowed_hosts):
            return True
        if not is_wildcard(self.bind_host):
            return host == self.bind_host.lower().strip("[]")
        local = (local_address or "").lower()
        return host in own_names() or (bool(local) and host in (local, local.removeprefix("::ffff:")))

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in (o.rstrip("/").lower() for o in self.allowed_origins) or "*" in self.allowed_origins:
            return True
        return origin in (f"http://{host_header.lower()}", f"https://{host_header.lower()}")

    def key_matches(self, offered: str | None) -> bool:
        if self.device_of is not None:
            return self.device_of(offered) is not None
        if self.api_key is None:
            return True
        if not offered:
            return False
        return hmac.compare_digest(offered.encode("utf-8"), self.api_key.encode("utf-8"))


def host_name(host_header: str) -> str | None:
    """The host part of a ``Host`` header, lowercased; None when the header is malformed."""
    m = _HOST_RE.match(host_header.strip().lower())
    if not m or (m["port"] and int(m["port"]) > 65535):
        return None
    if m["v6"] is not None:
        try:
            ipaddress.IPv6Address(m["v6"].split("%")[0])
        except ValueError:
            return None
        return m["v6"]
    name = m["name"].rstrip(".")
    return name if _NAME_RE.match(name) else None


@functools.lru_cache(maxsize=1)
def own_names() -> frozenset[str]:
    """This machine's host names, as a LAN client would type them (no DNS lookup: it may hang)."""
    name = socket.gethostname().lower()
    short = name.split(".")[0]
    return frozenset(n for n in (name, short, f"{short}.local") if n)


def is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None, devices_only: bool = False) -> None:
    """Refuse to serve the network without a key (or paired devices' tokens, ``devices_only``):
    anyone on it could otherwise use the models."""
    if not is_loopback(host) and not api_key and not devices_only:
        raise ServerError(f"refusing to listen on {host} without an API key: anyone on the network could "
                          f"use your models. Set one with `fireside serve --api-key KEY` (kept in the OS "
                          f"keyring) or listen on 127.0.0.1")


def offered_key(headers: dict[str, str]) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    return headers.get("x-api-key")
