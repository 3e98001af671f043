"""The shared listener: this machine's models offered to its paired devices over the local network.

``Sharing`` is what ``fireside serve --share`` and the app's "Share on the local network" switch both
run: this device's identity (its certificate, ``devices/identity.py``), a ``PairingDesk`` for the
one-time codes, a second app built by ``create_app`` whose policy takes paired devices' tokens only
(and the two pairing paths without one), served over TLS by its own ``ServerThread``, and the mDNS
announcement (``devices/announce.py``); with ``Share.lend_gib``, a ``Lender`` (``rpc/lending.py``) that
lends this machine's memory to paired devices through the RPC tunnel. ``start`` binds and announces; ``stop`` takes the
announcement back and stops the listener. Building it reads (or makes) the certificate and ``start``
binds a port and waits for mDNS probing (a second or two): call both off a GUI thread.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..settings import SHARE_PORT, Settings

if TYPE_CHECKING:
    from ..facade import Engine
    from ..library import Library

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Share:
    """Where and as whom to share."""

    host: str = "0.0.0.0"
    port: int = SHARE_PORT
    name: str | None = None  # None: the host name (``identity.default_name``)
    announce: bool = True  # announce by mDNS (a test on loopback may leave it out)
    lend_gib: float | None = None  # lend this much memory to paired devices (rpc/: llama.cpp's RPC server)


class Sharing:
    """The shared listener and its announcement. Started after the loopback server (when there is one),
    stopped before it."""

    def __init__(self, settings: Settings, share: Share, engine: Engine, library: Library | None = None,
                 jit: bool = True):
        from ..devices import LINK_IDLE_S, DeviceBook, Identity, PairingDesk, default_name
        from .app import create_app
        from .security import SecurityPolicy
        from .sharing import PAIRING_PATHS
        from .thread import ServerThread

        self.name = share.name or default_name()
        self.host, self.announce = share.host, share.announce
        self.identity = Identity.load_or_create(settings, self.name)
        log.info("sharing as %s, certificate fingerprint %s", self.name, self.identity.fingerprint)
        remotes = getattr(engine, "remotes", None)
        self.book = getattr(remotes, "devices", None) or DeviceBook(settings)
        self.desk = PairingDesk(self.book, self.identity, self.name)
        policy = SecurityPolicy(bind_host=share.host, port=share.port, device_of=self.book.client_for,
                                open_paths=PAIRING_PATHS)
        self.lender = None
        if share.lend_gib:
            from ..rpc import Lender

            self.lender = Lender(int(share.lend_gib * 2**30), settings.cache_dir)
            log.info("lending up to %.1f GiB of memory to paired devices", share.lend_gib)
        app = create_app(engine, settings, library, policy=policy, jit=jit, pairing=self.desk, shared=True,
                         lender=self.lender)
        self.server = ServerThread(app, share.host, share.port, ssl_certfile=str(self.identity.cert_path),
                                   ssl_keyfile=str(self.identity.key_path), keep_alive_s=LINK_IDLE_S,
                                   websockets=self.lender is not None)
        self.announcer = None

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> None:
        """Listen (TLS), then announce; a failed announcement stops the listener again."""
        from ..devices import Announcer
        from .security import is_wildcard

        self.server.start()
        if not self.announce:
            return
        try:
            addresses = None if is_wildcard(self.host) else [self.host]
            self.announcer = Announcer(self.name, self.server.port, self.identity.fingerprint, addresses)
        except BaseException:
            self.server.stop()
            raise

    def stop(self) -> None:
        """Take the announcement back, stop listening and stop lending (the worker ends within a second).
        Idempotent."""
        announcer, self.announcer = self.announcer, None
        try:
            if announcer is not None:
                announcer.close()
        finally:
            try:
                if self.lender is not None:
                    self.lender.stop()
            finally:
                self.server.stop()
