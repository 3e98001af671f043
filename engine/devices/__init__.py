"""Your other machines: share this one's models over the local network, pair devices with a short
code, and use a paired device's models as ``DEVICE/MODEL``.

``identity.py`` makes and keeps this machine's TLS certificate (its fingerprint is its identity);
``book.py`` keeps the paired devices (a file) and their tokens (the OS keyring), and answers whether a
token is a paired device's; ``pairing.py`` is the PAKE exchange (SPAKE2) that turns a one-time code into
pinned fingerprints and a shared token on both sides; ``announce.py`` announces and finds sharing
devices by mDNS/DNS-SD (``_fireside._tcp``); ``relocate.py`` finds a paired device again, by its pinned
certificate, when its address or port changed. The server (``engine/server/pairing.py``) serves the
pairing routes, ``engine/remote`` reaches paired devices, and ``fireside devices`` drives it all.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "CLIENT": "book",
    "DeviceBook": "book",
    "PairedDevice": "book",
    "SERVER": "book",
    "CLIENT_IDLE_S": "identity",
    "default_name": "identity",
    "fingerprint_of_pem": "identity",
    "Identity": "identity",
    "LINK_IDLE_S": "identity",
    "pinned_context": "identity",
    "short": "identity",
    "FINISH_PATH": "pairing",
    "pair": "pairing",
    "PairingDesk": "pairing",
    "show_code": "pairing",
    "START_PATH": "pairing",
    "Announcer": "announce",
    "browse": "announce",
    "Browser": "announce",
    "local_addresses": "announce",
    "Relocator": "relocate",
}
__all__ = ["Announcer", "Browser", "CLIENT", "CLIENT_IDLE_S", "DeviceBook", "FINISH_PATH", "Identity",
           "LINK_IDLE_S", "PairedDevice", "PairingDesk", "Relocator", "SERVER", "START_PATH", "browse",
           "default_name", "fingerprint_of_pem", "local_addresses", "pair", "pinned_context", "short",
           "show_code"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
