"""The main machine's side: the paired devices a load names (``fireside run MODEL --with alpha``), as
devices the fit planner places layers on, each reached through its own ``Tunnel``.

``offer(names)`` asks each device what it lends (``LEND_PATH`` on its shared listener, over TLS that
trusts only its pinned certificate, with the pairing's token) and returns a ``Device`` per device
(``rpc:NAME``, kind ``remote``, its free memory under its own cap) with the loopback endpoint of its
tunnel, which the runner's RPC client connects to. Tunnels stay open while this object lives (one
idle listening socket each) and are made again when a device moved or its tunnel was closed.
"""

from __future__ import annotations

import logging
import threading

from ..devices import SERVER, DeviceBook, PairedDevice, pinned_context
from ..errors import DeviceError
from ..models import Device
from .tunnel import LEND_PATH, Tunnel

log = logging.getLogger(__name__)
ASK_TIMEOUT_S = 5.0
REMOTE_PREFIX = "rpc:"


class Lenders:
    def __init__(self, book: DeviceBook):
        self.book = book
        self._tunnels: dict[str, Tunnel] = {}
        self._lock = threading.Lock()

    def offer(self, names: tuple[str, ...] | list[str], skip_gone: bool = False) -> tuple[list[Device], dict[str, str], list[str]]:
        """Each named device's lent memory as a planner ``Device``, its tunnel's endpoint by device name, and
        (with ``skip_gone``) why each device left out could not be used. Without ``skip_gone``, raises
        ``DeviceError`` naming a device that is not paired, cannot be reached, or lends nothing."""
        devices, endpoints, gone = [], {}, []
        # a name not paired at all is a mistake to say, never a device to plan around
        paired = [self.book.get(name, SERVER) for name in dict.fromkeys(names)]
        for i, device in enumerate(paired):
            try:
                dev, endpoint = self._one(i, device)
            except DeviceError as exc:
                if not skip_gone:
                    raise
                gone.append(str(exc))
                continue
            devices.append(dev)
            endpoints[dev.name] = endpoint
        return devices, endpoints, gone

    def _one(self, i: int, paired: PairedDevice) -> tuple[Device, str]:
        import httpx

        name = paired.name
        token = self.book.token(paired)
        if not token:
            raise DeviceError(f"{name}'s token is not in the keyring: pair with it again")
        try:
            with httpx.Client(verify=pinned_context(paired.cert_pem), timeout=ASK_TIMEOUT_S) as http:
                r = http.get(f"{paired.base_url}{LEND_PATH}", headers={"Authorization": f"Bearer {token}"})
        except httpx.HTTPError as exc:
            raise DeviceError(f"{name} cannot be reached at {paired.address} ({exc}); is it sharing?") from None
        if r.status_code != 200:
            said = r.json().get("error", {}).get("message", r.text) if r.headers.get("content-type", "").startswith(
                "application/json") else r.text
            raise DeviceError(f"{name} lends no memory: {said}")
        lent = r.json()
        dev = Device(index=1000 + i, name=f"{REMOTE_PREFIX}{name}", kind="remote", backend="RPC",
                     description=f"{name}: memory lent over the network ({paired.address})",
                     total_bytes=int(lent["total_bytes"]), free_bytes=int(lent["free_bytes"]))
        return dev, self._tunnel(name, paired.address, paired.cert_pem, token).endpoint

    def _tunnel(self, name: str, address: str, cert_pem: str, token: str) -> Tunnel:
        with self._lock:
            tunnel = self._tunnels.get(name)
            if tunnel is None or tunnel.closed.is_set() or tunnel.address != address:
                if tunnel is not None:
                    tunnel.close()
                tunnel = self._tunnels[name] = Tunnel(address, cert_pem, token, name)
            return tunnel

    def close(self) -> None:
        with self._lock:
            tunnels, self._tunnels = list(self._tunnels.values()), {}
        for tunnel in tunnels:
            tunnel.close()


def lent_now(book: DeviceBook, names: tuple[str, ...] | list[str], skip_gone: bool = False) -> tuple[list[Device], list[str]]:
    """What the named devices lend now (``Lenders.offer``), asked once, for a plan to show rather than load:
    no tunnel is kept."""
    lenders = Lenders(book)
    try:
        devices, _, gone = lenders.offer(names, skip_gone=skip_gone)
    finally:
        lenders.close()
    return devices, gone
