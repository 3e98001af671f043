"""Finding devices on the local network: mDNS/DNS-SD with ``zeroconf``.

A sharing Fireside announces ``NAME._fireside._tcp.local.`` on the shared listener's port and
addresses, with TXT records ``name`` (the device name), ``fp`` (its certificate's SHA-256
fingerprint) and ``v`` (the protocol version). The announcement is a hint, never trust: anyone on
the network can announce anything, which is why pairing proves the code (``pairing.py``) and later
connections pin the fingerprint kept then. ``Browser`` listens until closed and says whenever the
devices heard change (the app's live list); ``browse`` listens and returns once the device asked for
is found, or when its time is up. Threading: zeroconf runs its own threads;
``Announcer.close`` unregisters (a goodbye packet) and stops them.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

log = logging.getLogger(__name__)
SERVICE = "_fireside._tcp.local."
VERSION = "1"


@dataclass(frozen=True)
class Found:
    name: str
    addresses: tuple[str, ...]
    port: int
    fingerprint: str


def local_addresses() -> list[str]:
    """This machine's IPv4 addresses on its network interfaces, loopback left out."""
    import ifaddr

    return [ip.ip for adapter in ifaddr.get_adapters() for ip in adapter.ips
            if isinstance(ip.ip, str) and not ipaddress.ip_address(ip.ip).is_loopback]


class Announcer:
    """Announces this device while it shares; ``close`` takes the announcement back."""

    def __init__(self, name: str, port: int, fingerprint: str, addresses: list[str] | None = None):
        from zeroconf import ServiceInfo, Zeroconf

        addresses = addresses or local_addresses()
        self.info = ServiceInfo(SERVICE, f"{name}.{SERVICE}", port=port,
                                addresses=[ipaddress.ip_address(a).packed for a in addresses],
                                properties={"name": name, "fp": fingerprint, "v": VERSION},
                                server=f"{name}-fireside.local.")
        self.zc = Zeroconf()
        self.zc.register_service(self.info, allow_name_change=True)
        log.info("announcing %s on %s port %d by mDNS", name, ", ".join(addresses), port)

    def close(self) -> None:
        try:
            self.zc.unregister_service(self.info)
        finally:
            self.zc.close()


def _found(info) -> Found | None:
    props = {k.decode(errors="replace"): (v or b"").decode(errors="replace") for k, v in (info.properties or {}).items()}
    if not props.get("fp") or not info.port:
        return None
    return Found(props.get("name") or info.name.removesuffix("." + SERVICE), tuple(info.parsed_addresses()),
                 info.port, props["fp"])


class Browser:
    """Listens for sharing devices until ``close``: ``on_change(devices)`` (the sorted list of those heard
    and not gone) runs on zeroconf's thread whenever one arrives, changes or says goodbye."""

    def __init__(self, on_change: Callable[[list[Found]], None] | None = None, info_timeout_s: float = 3.0):
        from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

        self._on_change = on_change
        self._found: dict[str, Found] = {}  # by service name, as goodbyes name them
        self._lock = threading.Lock()
        outer = self

        class Listener(ServiceListener):
            def add_service(self, zc: Zeroconf, type_: str, name: str) -> None:
                info = zc.get_service_info(type_, name, timeout=int(info_timeout_s * 1000))
                device = _found(info) if info else None
                outer._update(name, device)

            update_service = add_service

            def remove_service(self, zc: Zeroconf, type_: str, name: str) -> None:
                outer._update(name, None)

        self.zc = Zeroconf()
        self.browser = ServiceBrowser(self.zc, SERVICE, listener=Listener())

    def _update(self, service: str, device: Found | None) -> None:
        with self._lock:
            if device is None and self._found.pop(service, None) is None:
                return
            if device is not None:
                self._found[service] = device
        if self._on_change is not None:
            self._on_change(self.found())

    def found(self) -> list[Found]:
        with self._lock:
            return sorted(self._found.values(), key=lambda d: d.name)

    def close(self) -> None:
        self._on_change = None
        try:
            self.browser.cancel()
        finally:
            self.zc.close()


def browse(timeout: float = 3.0, want: str | None = None, fingerprint: str | None = None) -> list[Found]:
    """Sharing devices heard within ``timeout`` seconds (sooner once ``want`` is among them, or one that
    announces ``fingerprint``: a hint to check, since anyone may announce any fingerprint)."""
    arrived = threading.Event()

    def on_change(found: list[Found]) -> None:
        if want is not None and any(d.name == want for d in found):
            arrived.set()
        if fingerprint is not None and any(d.fingerprint == fingerprint for d in found):
            arrived.set()

    browser = Browser(on_change, info_timeout_s=max(timeout, 1.0))
    try:
        arrived.wait(timeout)
        return browser.found()
    finally:
        browser.close()
