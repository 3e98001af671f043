"""This machine's identity on the network: a self-signed TLS certificate whose SHA-256 fingerprint
other devices pin when they pair.

The certificate (``device-cert.pem``) and its private key (``device-key.pem``, mode 0600) live in the
data folder's ``devices/``; both are made once with ``cryptography`` (an ECDSA P-256 key, ten years,
the device's name as its common name) and kept, so a restart keeps the fingerprint paired devices
pinned. Nobody checks the certificate against a CA: its fingerprint, learnt during pairing under the
PAKE (``pairing.py``), is the only thing trusted. Threading: any thread (the app reads it on one worker
while another starts sharing: making the files is under a lock).
"""

from __future__ import annotations

import datetime
import hashlib
import os
import socket
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import DeviceError
from ..fsutil import atomic_write
from ..settings import Settings

CERT_FILE, KEY_FILE = "device-cert.pem", "device-key.pem"
VALID_DAYS = 3650
# How long a connection between two devices stays open idle. A TCP and TLS handshake costs a reply's
# first token several ms, and people pause far longer than uvicorn's 5 s between chats: the shared
# listener keeps a paired device's connection this long, and the device's client a little less
# (``CLIENT_IDLE_S``), so it never sends on a connection the listener is closing. Each request still
# carries its token, checked as it arrives, so a revoke is no slower on a connection kept open.
LINK_IDLE_S = 60
CLIENT_IDLE_S = LINK_IDLE_S - 5
_CREATING = threading.Lock()


def default_name() -> str:
    """This machine's short host name as a device name (``studio`` of ``studio.lan``)."""
    name = socket.gethostname().split(".")[0].lower()
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)[:63] or "fireside"


def fingerprint_of_der(der: bytes) -> str:
    """The SHA-256 of a certificate's DER bytes, as lowercase hex: what devices pin."""
    return hashlib.sha256(der).hexdigest()


def fingerprint_of_pem(pem: str) -> str:
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(pem))


def short(fingerprint: str) -> str:
    """A fingerprint as people compare it: its first 16 hex digits in groups of four."""
    return " ".join(fingerprint[i:i + 4] for i in range(0, 16, 4))


@dataclass(frozen=True)
class Identity:
    """This device's certificate and key files, the certificate's PEM text and its fingerprint."""

    cert_path: Path
    key_path: Path
    cert_pem: str
    fingerprint: str

    @classmethod
    def load_or_create(cls, settings: Settings, name: str | None = None) -> Identity:
        folder = Path(settings.data_dir) / "devices"
        cert_path, key_path = folder / CERT_FILE, folder / KEY_FILE
        with _CREATING:  # two threads making it at once would leave one's key beside the other's certificate
            if not (cert_path.exists() and key_path.exists()):
                _create(cert_path, key_path, name or default_name())
        try:
            pem = cert_path.read_text(encoding="ascii")
            return cls(cert_path, key_path, pem, fingerprint_of_pem(pem))
        except (OSError, ValueError) as exc:
            raise DeviceError(f"this device's certificate {cert_path} cannot be read ({exc}); delete "
                              f"{folder} to make a new one (paired devices must then pair again)") from None


def _create(cert_path: Path, key_path: Path, name: str) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"Fireside {name}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            # not a CA: trusted as the pinned anchor, it vouches for itself alone, never for a certificate its key signed
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    key_path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(key_path.parent, 0o700)
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # never readable by others, not even briefly
    with os.fdopen(fd, "wb") as fh:
        fh.write(key_pem)
    os.chmod(key_path, 0o600)
    atomic_write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    os.chmod(cert_path, 0o600)


def pinned_context(cert_pem: str) -> ssl.SSLContext:
    """A client TLS context that trusts exactly this certificate (the pinned one) and nothing else:
    no CA, and no host-name check (a device's address changes; its key does not)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(cadata=cert_pem)
    return ctx


def peer_certificate(host: str, port: int, timeout: float = 3.0) -> str:
    """The PEM certificate a server at ``host:port`` presents, unverified: pairing checks it under the
    PAKE instead. ``DeviceError`` when it cannot be reached."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=None) as tls:
            der = tls.getpeercert(binary_form=True)
    except OSError as exc:
        raise DeviceError(f"cannot reach a sharing Fireside at {host}:{port} ({exc})") from None
    if not der:
        raise DeviceError(f"{host}:{port} presented no certificate")
    return ssl.DER_cert_to_PEM_cert(der)
