"""Finding devices on the local network: mDNS/DNS-SD with ``zeroconf``.

A sharing Fireside announces ``NAME._fireside._tcp.local.`` on the shared listener's port and
addresses, with TXT records ``name`` (the device name), ``fp`` (its certificate's SHA-256
fingerprint) and ``v`` (the protocol version). The announcement is a hint, never trust: anyone on
the network can announce anything, which is why pairing proves the code (``pairing.py``) and later
connections pin the fingerprint kept then. ``browse`` listens for announcements and returns once the
device asked for is found, or when its time is up. Threading: zeroconf runs its own threads;
``Announcer.close`` unregisters (a goodbye packet) and stops them.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
import time
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


def browse(timeout: float = 3.0, want: str | None = None) -> list[Found]:
    """Sharing devices heard within ``timeout`` seconds (sooner once ``want`` is among them)."""
    from zeroconf import ServiceBrowser, ServiceListener, Zeroconf

    found: dict[str, Found] = {}
    arrived = threading.Event()
    zc = Zeroconf()

    class Listener(ServiceListener):
        def add_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            info = zc.get_service_info(type_, name, timeout=int(max(timeout, 1.0) * 1000))
            device = _found(info) if info else None
            if device:
                found[device.name] = device
                if want is None or device.name == want:
                    arrived.set()

        update_service = add_service

        def remove_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            pass

    browser = ServiceBrowser(zc, SERVICE, listener=Listener())
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            arrived.wait(max(0.0, deadline - time.monotonic()))
            if want is not None and want in found:
                break
            arrived.clear()
    finally:
        browser.cancel()
        zc.close()
    return sorted(found.values(), key=lambda d: d.name)
