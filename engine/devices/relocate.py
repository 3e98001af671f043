"""Finding a paired device again after it moved: its address changed (DHCP) or its share port did.

A device this one uses is kept in the book at ``host:port``, where it was last found. When nothing
answers there, ``Relocator.find`` listens for it by mDNS (``announce.browse``, a few seconds at most)
and matches what it hears by the pinned certificate's fingerprint, never by name: a name is a label
anyone may announce. A fingerprint in an announcement is only a hint too, so before the book is
changed the new address must complete a TLS handshake that trusts nothing but the pinned certificate
(``identity.pinned_context``); no token is sent for that check. An announcement with the right name
and another certificate, or with the right fingerprint and another certificate behind it, is
refused, and the book keeps the old address.

A device that is really off must not cost every request a browse: after a look that found nothing,
that device is not looked for again for ``RETRY_AFTER_S`` (its requests fail at once, as before).
Threading: any thread; looks for one device run one at a time, and a caller that waited on another's
look gets its answer from the book.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable

from ..errors import DeviceError
from .announce import Found, browse
from .book import SERVER, DeviceBook, PairedDevice
from .identity import fingerprint_of_der, pinned_context

log = logging.getLogger(__name__)
LISTEN_S = 2.5  # how long to listen for a device that moved
RETRY_AFTER_S = 60.0  # a device not found is not looked for again for this long
PROBE_S = 3.0  # the TLS handshake that proves a new address


def _address(host: str, port: int) -> str:
    return f"{host}:{port}"


def proves(host: str, port: int, device: PairedDevice, timeout: float = PROBE_S) -> bool:
    """Whether ``host:port`` completes a TLS handshake with exactly the certificate pinned for ``device``."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                pinned_context(device.cert_pem).wrap_socket(raw, server_hostname=None) as tls:
            der = tls.getpeercert(binary_form=True)
    except (OSError, ValueError):
        return False
    return bool(der) and fingerprint_of_der(der) == device.fingerprint


class Relocator:
    """Moves paired devices in ``book`` to where they are heard now, once their certificate proves it.
    ``browse`` (the mDNS look) and ``probe`` (the handshake) are seams for tests."""

    def __init__(self, book: DeviceBook, browse: Callable[..., list[Found]] = browse,
                 probe: Callable[[str, int, PairedDevice], bool] = proves,
                 listen_s: float = LISTEN_S, retry_after_s: float = RETRY_AFTER_S):
        self.book, self._browse, self._probe = book, browse, probe
        self.listen_s, self.retry_after_s = listen_s, retry_after_s
        self._lock = threading.Lock()
        self._looking: dict[str, threading.Lock] = {}
        self._missed: dict[str, float] = {}  # device name -> when a look last found nothing (monotonic)

    def find(self, device: PairedDevice) -> PairedDevice:
        """``device`` at the address where it answers now, after listening for it by mDNS; the book is
        updated. ``DeviceError`` saying why not (not heard, only heard with another certificate, or
        looked for lately)."""
        with self._lock:
            looking = self._looking.setdefault(device.name, threading.Lock())
        with looking:
            current = self._current(device)
            if current.address != device.address:  # another request found it while this one waited
                return current
            missed = self._missed.get(device.name)
            if missed is not None and time.monotonic() - missed < self.retry_after_s:
                raise DeviceError(f"not found on the local network {time.monotonic() - missed:.0f} s ago; looked "
                                  f"for again after {self.retry_after_s:g} s")
            heard = self._browse(self.listen_s, fingerprint=device.fingerprint)
            moved, refused = self._place(current, heard)
            if moved is not None:
                self._missed.pop(device.name, None)
                return moved
            self._missed[device.name] = time.monotonic()
            if refused:
                raise DeviceError("; ".join(refused))
            raise DeviceError(f"not heard on the local network by its certificate (listened {self.listen_s:g} s)")

    def update(self, heard: list[Found]) -> list[tuple[PairedDevice, str]]:
        """Move every paired device heard (by its fingerprint) at an address other than its recorded one,
        once that address proves it; ``[(device now, its old address)]``. For a list already heard
        (``fireside devices ls``, the app's live list)."""
        moves = []
        for device in self.book.list(SERVER):
            old = device.address
            moved, _ = self._place(device, heard)
            if moved is not None:
                self._missed.pop(device.name, None)
                moves.append((moved, old))
        return moves

    def _place(self, device: PairedDevice, heard: list[Found]) -> tuple[PairedDevice | None, list[str]]:
        """The device moved to the first heard address of its fingerprint that proves it (None when there
        is none: already there, not heard, or refused), and why each candidate was refused."""
        refused = [f"{f.name!r} was heard at {', '.join(_address(a, f.port) for a in f.addresses)} with "
                   f"another certificate; refused (a name alone is not trusted)"
                   for f in heard if f.name == device.name and f.fingerprint != device.fingerprint]
        for found in (f for f in heard if f.fingerprint == device.fingerprint):
            places = [_address(a, found.port) for a in found.addresses]
            if device.address in places:  # it is where the book says: nothing to move
                return None, [f"it is announced at its recorded address {device.address}, which did not answer"]
            for host, place in zip(found.addresses, places):
                if self._probe(host, found.port, device):
                    log.info("paired device %s moved from %s to %s (its certificate proves it)",
                             device.name, device.address, place)
                    return self.book.move(device.name, place), []
                refused.append(f"an announcement of its fingerprint at {place} did not present its certificate; "
                               f"refused")
        return None, refused

    def _current(self, device: PairedDevice) -> PairedDevice:
        try:
            return self.book.get(device.name, SERVER)
        except DeviceError:
            return device
