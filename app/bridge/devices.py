"""Your other machines, as the app reaches them: sharing this one on the local network, the devices heard
there, pairing with one, and the paired devices with their state (part of the bridge: ``ctx.bridge.devices``).

Sharing is the engine's ``Sharing`` (``engine/server/shared.py``, what ``fireside serve --share`` runs):
a TLS listener for paired devices only and the mDNS announcement, started and stopped on the task
pool. The live list of devices on the network is an ``announce.Browser``, whose zeroconf thread emits
``discovered`` (queued onto the GUI thread). Pairing (a TLS handshake and the SPAKE2 exchange, then a
keyring write), reading the device book and asking paired devices for their models all run on
workers and answer through ``on_done(result, error)``. Asking again (``list_devices(fresh=True)``, the
page's Check again) first moves a paired device heard on the network at a new address to it, once
its pinned certificate proves it (``devices/relocate.py``). A one-time code is opened on the running
``PairingDesk`` itself: a lock and six random digits, nothing that waits.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from fireside.engine.errors import DeviceError
from fireside.engine.settings import SHARE_PORT

from .tasks import OnDone, Tasks

log = logging.getLogger(__name__)
CLIENT, SERVER = "client", "server"  # as ``devices/book.py``: a device that uses this one / one this one uses


@dataclass(frozen=True)
class ShareConfig:
    """Where and as whom to share (the page reads it from the preferences on the GUI thread)."""

    host: str = "0.0.0.0"
    port: int = SHARE_PORT
    name: str | None = None  # None: the host name
    announce: bool = True
    lend_gib: float | None = None  # lend this much memory to paired devices (engine/rpc/); None: lend none


@dataclass(frozen=True)
class ThisDevice:
    """This device as others see it: its name, its certificate's fingerprint, and where it shares (or None):
    ``url`` is an address other machines can use (this machine's network address, never ``0.0.0.0``),
    ``urls`` every such address."""

    name: str
    fingerprint: str
    url: str | None = None
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceRow:
    """A paired device for the list: ``role`` CLIENT (uses this one) or SERVER (this one uses its models);
    for a SERVER, whether it answered (``reachable``), its models' ids, or why not (``error``)."""

    name: str
    role: str
    fingerprint: str
    address: str = ""
    reachable: bool = False
    models: tuple[str, ...] = ()
    error: str = ""


class DevicesController(QObject):
    """Sharing, discovery, pairing and the paired devices. Lives on the GUI thread.

    Signals:
        identity_read(object): a ``ThisDevice`` (read, or made, once when asked).
        sharing_started(object): a ``ThisDevice`` with its ``url``: the shared listener is up and announced.
        sharing_stopped(): the shared listener has stopped (or failed to start).
        discovered(list): the ``Found`` devices sharing on the network, this one left out (live).
        failed(str, object): what failed ("starting to share", "listening for devices", ...), the exception.
    """

    identity_read = Signal(object)
    sharing_started = Signal(object)
    sharing_stopped = Signal()
    discovered = Signal(list)
    failed = Signal(str, object)

    def __init__(self, engine, settings, tasks: Tasks, parent: QObject | None = None):
        super().__init__(parent)
        self.engine, self.settings, self.tasks = engine, settings, tasks
        self.sharing = None  # the engine's ``Sharing`` while it runs
        self.device: ThisDevice | None = None  # this device as it shares, while it does
        self.browser = None
        self._browsing = False
        self._fingerprint = ""

    @property
    def book(self):
        from fireside.engine.devices import DeviceBook

        remotes = getattr(self.engine, "remotes", None)
        return getattr(remotes, "devices", None) or DeviceBook(self.settings)

    @property
    def shared(self) -> bool:
        return self.sharing is not None

    # --- this device -----------------------------------------------------------------------------
    def read_identity(self, name: str | None) -> None:
        """Read (or make, the first time) this device's certificate on a worker; ``identity_read`` brings it."""
        self.tasks.run_in_background(lambda: self._identity(name), self._on_identity_done)

    def _identity(self, name: str | None) -> ThisDevice:
        from fireside.engine.devices import Identity, default_name

        name = name or default_name()
        self.settings.ensure_dirs()
        return ThisDevice(name, Identity.load_or_create(self.settings, name).fingerprint)

    def _on_identity_done(self, device, error) -> None:
        if error is not None:
            self.failed.emit("reading this device's certificate", error)
            return
        self._fingerprint = device.fingerprint
        self.identity_read.emit(device)

    # --- sharing ---------------------------------------------------------------------------------
    def start_sharing(self, config: ShareConfig) -> None:
        """Listen with TLS and announce, on a worker; ``sharing_started`` or ``failed`` + ``sharing_stopped``."""
        from fireside.engine.server import Share, Sharing

        def work():
            self.settings.ensure_dirs()
            sharing = Sharing(self.settings, Share(config.host, config.port, config.name, config.announce,
                                                   lend_gib=config.lend_gib), self.engine)
            sharing.start()
            return sharing, tuple(sharing.server.reachable_urls)  # the interfaces read here, not on the GUI thread

        self.tasks.run_in_background(work, self._on_sharing_done)

    def _on_sharing_done(self, result, error) -> None:
        if error is not None:
            self.failed.emit("starting to share on the local network", error)
            self.sharing_stopped.emit()
            return
        self.sharing, urls = result
        self._fingerprint = self.sharing.identity.fingerprint
        self.device = ThisDevice(self.sharing.name, self._fingerprint, urls[0], urls)
        self.sharing_started.emit(self.device)

    def stop_sharing(self, wait: bool = False) -> None:
        """Take the announcement back and stop the listener: on a worker, or here and now with ``wait``."""
        sharing, self.sharing, self.device = self.sharing, None, None
        if sharing is None:
            return
        if wait:
            sharing.stop()
            self.sharing_stopped.emit()
        else:
            self.tasks.run_in_background(sharing.stop, self._on_sharing_stopped)

    def _on_sharing_stopped(self, _result, error) -> None:
        if error is not None:
            self.failed.emit("stopping sharing", error)
        self.sharing_stopped.emit()

    def open_code(self) -> tuple[str, float, int]:
        """A fresh one-time pairing code (shown as ``123-456``), how many seconds it is valid and its tries.
        ``DeviceError`` while not sharing."""
        from fireside.engine.devices import show_code

        if self.sharing is None:
            raise DeviceError("Turn on sharing first: a pairing code works only while this device shares")
        code, valid_s = self.sharing.desk.open_code()
        return show_code(code), valid_s, self.sharing.desk.max_tries

    # --- the network -----------------------------------------------------------------------------
    def start_browsing(self) -> None:
        """Listen for sharing devices (zeroconf binds its sockets on a worker); ``discovered`` follows each change."""
        from fireside.engine.devices import Browser

        if self._browsing:
            return
        self._browsing = True
        self.tasks.run_in_background(lambda: Browser(self._on_browser_changed), self._on_browsing)

    def _on_browsing(self, browser, error) -> None:
        if error is not None:
            self._browsing = False
            self.failed.emit("listening for devices on the local network", error)
            return
        if not self._browsing:  # stopped while it was starting
            self.tasks.run_in_background(browser.close)
            return
        self.browser = browser

    def _on_browser_changed(self, found: list) -> None:  # on zeroconf's thread: the signal is queued
        if not self._browsing:  # stopped: the browser closes on a worker and may still report a change
            return
        # the bridge may be deleted (the app closing) between that check and the emit: nothing to tell
        with contextlib.suppress(RuntimeError):  # "Signal source has been deleted"
            self.discovered.emit([f for f in found if f.fingerprint != self._fingerprint])

    def stop_browsing(self, wait: bool = False) -> None:
        browser, self.browser, self._browsing = self.browser, None, False
        if browser is not None:
            browser.close() if wait else self.tasks.run_in_background(browser.close)

    # --- paired devices --------------------------------------------------------------------------
    def list_devices(self, fresh: bool, on_done: OnDone) -> None:
        """Every paired device as a ``DeviceRow``, those this one uses first, in the preferred order; they
        are asked for their models (``fresh`` skips the engine's short cache; a dead one answers within
        a few seconds)."""
        def work() -> list[DeviceRow]:
            if fresh and self.browser is not None:
                self._relocate(self.browser.found())
            statuses = {s.endpoint.name: s for s in self.engine.remote_statuses(fresh=fresh)
                        if getattr(s.endpoint, "fingerprint", "")}  # the devices' statuses, not the remotes'
            rows = []
            for d in self.book.list():
                status = statuses.get(d.name) if d.role == SERVER else None
                rows.append(DeviceRow(d.name, d.role, d.fingerprint, d.address,
                                      bool(status and not status.error),
                                      tuple(m.id for m in status.models) if status else (),
                                      status.error if status else ""))
            order = {name: i for i, name in enumerate(self.book.order())}
            return sorted(rows, key=lambda r: (r.role != SERVER, order.get(r.name, 0), r.name))
        self.tasks.run_in_background(work, on_done)

    def _relocate(self, heard: list) -> None:
        """Move paired devices heard at a new address (their certificate checked there first); on a worker."""
        from fireside.engine.devices import Relocator

        relocator = getattr(getattr(self.engine, "remotes", None), "relocator", None) or Relocator(self.book)
        for device, old in relocator.update(heard):
            log.info("paired device %s found again at %s (was %s)", device.name, device.address, old)

    def set_order(self, names: list[str], on_done: OnDone) -> None:
        """Prefer the devices this one uses in this order (for a model several serve), on a worker."""
        self.tasks.run_in_background(lambda: self.book.set_order(names), on_done)

    def pair(self, found, code: str, my_name: str | None, on_done: OnDone) -> None:
        """Pair with ``found`` (an ``announce.Found``) using the code it shows, as ``my_name`` (None: the
        host name), on a worker; ``on_done`` gets the ``PairedDevice``, or a ``DeviceError`` that says
        why not (a wrong code says so, with the tries left)."""
        from fireside.engine.devices import Identity, pair

        def work():
            me = self._identity(my_name)
            if not found.addresses:
                raise DeviceError(f"{found.name} announces no address to reach it at")
            return pair(self.book, Identity.load_or_create(self.settings, me.name), me.name, found.name,
                        found.addresses[0], found.port, code, expected_fingerprint=found.fingerprint)
        self.tasks.run_in_background(work, on_done)

    def remove(self, name: str, role: str, on_done: OnDone) -> None:
        """Forget a device this one uses (SERVER) or revoke one that uses this one (CLIENT), on a worker."""
        self.tasks.run_in_background(lambda: self.book.remove(name, role), on_done)

    def close(self) -> None:
        """Stop listening for devices and stop sharing (at shutdown; waits)."""
        self.stop_browsing(wait=True)
        self.stop_sharing(wait=True)
