"""Your other machines: share this one's models over the local network, pair devices with a short
code, and use a paired device's models as ``DEVICE/MODEL``.

``identity.py`` makes and keeps this machine's TLS certificate (its fingerprint is its identity);
``book.py`` keeps the paired devices (a file) and their tokens (the OS keyring), and answers whether a
token is a paired device's; ``pairing.py`` is the PAKE exchange (SPAKE2) that turns a one-time code into
pinned fingerprints and a shared token on both sides; ``announce.py`` announces and finds sharing
devices by mDNS/DNS-SD (``_fireside._tcp``); ``relocate.py`` finds a paired device again, by its pinned
certificate, when its address or port changed. The server (``engine/server/pairing.py``) serves the
pairing routes, ``engine/remote`` reaches paired devices, and ``fireside devices`` drives it all.
"""

from .book import DeviceBook, PairedDevice
from .identity import Identity, fingerprint_of_pem

__all__ = ["DeviceBook", "Identity", "PairedDevice", "fingerprint_of_pem"]
