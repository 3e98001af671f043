"""Pairing: a six-digit one-time code becomes, on both devices, the other's pinned certificate
fingerprint and a shared per-device token, safely against an active attacker on the same network.

The construction (docs/security.md, "Your other devices", says why each step is there):

1. The device that shares opens a code (``PairingDesk.open_code``): six random digits, valid
   ``CODE_VALID_S``, for at most ``CODE_TRIES`` exchanges; used once, it is gone.
2. The device that pairs reads the sharer's certificate from a TLS connection (unverified: nothing is
   trusted yet) and from then on talks to it over TLS pinned to that certificate. It runs SPAKE2
   (the ``spake2`` package: Ed25519 group, the code as the password, fixed identities) and sends its
   message with its name and its own certificate fingerprint (``/fireside/pair/start``); the sharer
   answers with its own SPAKE2 message. Each such exchange spends one of the code's tries.
3. Both hold a 32-byte key K, equal only if both used the same code. An attacker who does not know
   the code gets one guess per exchange (SPAKE2 allows no offline guessing), so three tries of a
   million codes leave it a 3-in-a-million chance per code shown.
4. Key confirmation, bound to the channel: the pairing device sends HMAC-SHA256(K, "client" ||
   both names || the sharer's fingerprint *as it saw it* || its own fingerprint || both SPAKE2
   messages) (``/fireside/pair/finish``). The sharer recomputes it with its own fingerprint: a
   wrong code, or a man in the middle that showed the pairing device another certificate, fails
   here, and the sharer refuses. Then the sharer sends its own confirmation ("server" || the same),
   which the pairing device checks before keeping anything.
5. Both derive the token as HKDF-SHA256(K, "fireside device token" || both fingerprints) and keep it
   in the keyring with the other's fingerprint (``book.py``); the token never crosses the network
   during pairing. Later requests send it as the bearer key over TLS pinned to the fingerprint.

Threading: ``PairingDesk`` is shared by the server's threads (one lock); ``pair`` blocks (network).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field

import httpx

from ..errors import DeviceError
from .book import CLIENT, SERVER, DeviceBook, PairedDevice, check_device_name
from .identity import Identity, fingerprint_of_pem, peer_certificate, pinned_context

CODE_DIGITS = 6
CODE_VALID_S = 300.0
CODE_TRIES = 3
SESSION_S = 30.0  # how long the pairing device has between its two requests
ID_CLIENT, ID_SERVER = b"fireside pairing client", b"fireside pairing server"
START_PATH, FINISH_PATH = "/fireside/pair/start", "/fireside/pair/finish"


def normalize_code(code: str) -> str:
    return "".join(c for c in str(code) if c.isdigit())


def show_code(code: str) -> str:
    return f"{code[:3]}-{code[3:]}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


def _unb64(text: object, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(str(text).encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        raise DeviceError(f"the pairing {what} is not base64") from None


def _transcript(client: str, server: str, fp_server: str, fp_client: str, msg_c: bytes, msg_s: bytes) -> bytes:
    parts = [client.encode(), server.encode(), fp_server.encode(), fp_client.encode(), msg_c, msg_s]
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)  # length-prefixed: no two splits alike


def confirmation(key: bytes, side: bytes, transcript: bytes) -> bytes:
    return hmac.new(key, b"fireside pairing v1 " + side + transcript, hashlib.sha256).digest()


def derive_token(key: bytes, fp_server: str, fp_client: str) -> str:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=b"fireside device token" + fp_server.encode() + fp_client.encode()).derive(key)
    return _b64(raw).rstrip("=")


@dataclass
class _Session:
    client: str
    fp_client: str
    key: bytes
    transcript: bytes
    started: float = field(default_factory=time.monotonic)


class PairingDesk:
    """The sharing side: the open code, its tries, and the exchanges under way."""

    def __init__(self, book: DeviceBook, identity: Identity, name: str, *, valid_s: float = CODE_VALID_S,
                 tries: int = CODE_TRIES):
        self.book, self.identity, self.name = book, identity, name
        self.valid_s, self.max_tries = valid_s, tries
        self._lock = threading.Lock()
        self._code: str | None = None
        self._expires = 0.0
        self._tries = 0
        self._sessions: dict[str, _Session] = {}

    def open_code(self) -> tuple[str, float]:
        """A fresh code (any earlier one is gone) and how many seconds it is valid."""
        code = "".join(secrets.choice("0123456789") for _ in range(CODE_DIGITS))
        with self._lock:
            self._code, self._expires, self._tries = code, time.monotonic() + self.valid_s, self.max_tries
            self._sessions.clear()
        return code, self.valid_s

    def start(self, client: str, fp_client: str, message: str) -> dict:
        """One SPAKE2 exchange under the open code; spends a try. ``DeviceError`` without a usable code."""
        from spake2 import SPAKE2_B

        check_device_name(client)
        msg_c = _unb64(message, "message")
        with self._lock:
            if self._code is None or time.monotonic() > self._expires or self._tries <= 0:
                self._code = None
                raise DeviceError("no pairing code is open on this device (or it expired, or its tries are "
                                  "spent): show a new one with `fireside devices code`")
            self._tries -= 1
            code = self._code
            if self._tries == 0:
                self._code = None  # the last try: no further exchange under this code
        spake = SPAKE2_B(code.encode(), idA=ID_CLIENT, idB=ID_SERVER)
        msg_s = spake.start()
        try:
            key = spake.finish(msg_c)
        except Exception:  # a malformed point: this try is spent all the same
            raise DeviceError("the pairing message is malformed") from None
        session = secrets.token_urlsafe(16)
        transcript = _transcript(client, self.name, self.identity.fingerprint, fp_client, msg_c, msg_s)
        with self._lock:
            self._sessions[session] = _Session(client, fp_client, key, transcript)
        return {"session": session, "name": self.name, "message": _b64(msg_s)}

    def finish(self, session: str, confirm: str) -> dict:
        """Check the pairing device's confirmation; on success keep it as a client and confirm back."""
        with self._lock:
            found = self._sessions.pop(str(session), None)
            tries = self._tries if self._code else 0
        if found is None or time.monotonic() - found.started > SESSION_S:
            raise DeviceError("this pairing exchange is unknown or took too long; start again")
        expected = confirmation(found.key, b"client", found.transcript)
        if not hmac.compare_digest(expected, _unb64(confirm, "confirmation")):
            raise DeviceError(f"wrong pairing code (or the connection was tampered with); {tries} "
                              f"{'try' if tries == 1 else 'tries'} left on this code")
        with self._lock:
            self._code, self._sessions = None, {}  # used once: gone
        token = derive_token(found.key, self.identity.fingerprint, found.fp_client)
        self.book.add(PairedDevice(found.client, CLIENT, found.fp_client), token)
        return {"confirm": _b64(confirmation(found.key, b"server", found.transcript))}


def pair(book: DeviceBook, identity: Identity, my_name: str, name: str, host: str, port: int, code: str,
         expected_fingerprint: str | None = None, timeout: float = 10.0) -> PairedDevice:
    """The pairing side: run the exchange with the sharer at ``host:port`` and keep it as ``name``.
    ``expected_fingerprint`` (from its mDNS announcement) must match the certificate it presents."""
    from spake2 import SPAKE2_A

    check_device_name(name)
    pem = peer_certificate(host, port)
    fp_server = fingerprint_of_pem(pem)
    if expected_fingerprint and fp_server != expected_fingerprint:
        raise DeviceError(f"{host}:{port} presents a certificate other than the one {name!r} announces; "
                          "refusing to pair (someone may be impersonating it)")
    spake = SPAKE2_A(normalize_code(code).encode(), idA=ID_CLIENT, idB=ID_SERVER)
    msg_c = spake.start()
    address = f"{host}:{port}"
    with httpx.Client(base_url=PairedDevice(name, SERVER, fp_server, address=address).base_url,
                      verify=pinned_context(pem), timeout=timeout) as http:
        started = _post(http, START_PATH, {"name": my_name, "fingerprint": identity.fingerprint,
                                           "message": _b64(msg_c)})
        msg_s = _unb64(started.get("message"), "message")
        try:
            key = spake.finish(msg_s)
        except Exception:
            raise DeviceError("the sharing device's pairing message is malformed") from None
        transcript = _transcript(my_name, str(started.get("name", "")), fp_server, identity.fingerprint, msg_c, msg_s)
        done = _post(http, FINISH_PATH, {"session": started.get("session"),
                                         "confirm": _b64(confirmation(key, b"client", transcript))})
    if not hmac.compare_digest(confirmation(key, b"server", transcript), _unb64(done.get("confirm"), "confirmation")):
        raise DeviceError(f"{name!r} did not prove it knows the code; nothing was kept")
    token = derive_token(key, fp_server, identity.fingerprint)
    return book.add(PairedDevice(name, SERVER, fp_server, cert_pem=pem, address=address), token)


def _post(http: httpx.Client, path: str, body: dict) -> dict:
    try:
        r = http.post(path, json=body)
    except httpx.HTTPError as exc:
        raise DeviceError(f"pairing failed: the sharing device did not answer ({type(exc).__name__}: {exc})") from None
    try:
        data = r.json()
    except ValueError:
        data = {}
    if r.status_code != 200:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        raise DeviceError(f"pairing refused: {message or f'HTTP {r.status_code}'}")
    return data if isinstance(data, dict) else {}
