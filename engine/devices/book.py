"""The paired devices: who they are (``devices.json`` in the config folder) and their tokens (the OS
keyring, service ``Fireside devices``), and the check the shared listener makes on every request.

``order`` (in the same file) is the user's preferred order of the devices this one uses: a model asked
for by its bare name, not in this machine's library, goes to the first of them that lists it.

A pairing leaves one record on each side, named by the other device: on the device that shares, a
``client`` (a device allowed to use this one: its certificate fingerprint, and the token it must
send); on the device that paired, a ``server`` (a device whose models this one uses: its pinned
certificate, where it was found, and the token to send). The token of one pairing is the same on both
sides (both derive it from the PAKE's key, see ``pairing.py``); it lives only in the keyring, under
``client:NAME`` or ``server:NAME``.

Revoking a client removes its record and its token; the shared listener re-reads the book whenever
the file changes (a ``stat`` per request), so a ``fireside devices revoke`` from another process takes
effect on that device's next request; the devices this one uses are read the same way (``servers``). Thread-safe; the file is written whole (``atomic_write``).
"""

from __future__ import annotations

import hmac
import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import DeviceError
from ..fsutil import atomic_write
from ..secrets import SecretStore
from ..settings import Settings

KEYRING_SERVICE = "Fireside devices"
CLIENT, SERVER = "client", "server"  # a device that uses this one / a device this one uses
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$")


def check_device_name(name: str) -> str:
    """A device name is a slug without dots or slashes, so ``DEVICE/MODEL`` splits at its first slash."""
    if not isinstance(name, str) or not _NAME_RE.match(name) or name == "remote":
        raise DeviceError(f"{name!r} is not a usable device name: use letters, digits, '_' or '-' (at most 63, "
                          f"not 'remote'), starting with a letter or digit")
    return name


@dataclass
class PairedDevice:
    name: str
    role: str  # CLIENT or SERVER
    fingerprint: str
    cert_pem: str = ""  # a SERVER's certificate, pinned: the only one its TLS may present
    address: str = ""  # a SERVER's host:port, where it was last found
    paired_at: float = 0.0

    @property
    def base_url(self) -> str:
        host, _, port = self.address.rpartition(":")
        return f"https://{f'[{host}]' if ':' in host else host}:{port}"


class DeviceKeys(SecretStore):
    def __init__(self):
        super().__init__(KEYRING_SERVICE, DeviceError, "token of paired device",
                         "pairing needs a keyring to keep the device's token")


class DeviceBook:
    """``devices.json`` plus the token store (``DeviceKeys`` unless a test passes its own)."""

    def __init__(self, settings: Settings, keys: SecretStore | None = None):
        self.path = Path(settings.config_dir) / "devices.json"
        self.keys = keys or DeviceKeys()
        self._lock = threading.Lock()
        self._seen: tuple | None = None  # the file's (mtime_ns, size, inode) when the tokens were read
        self._tokens: list[tuple[str, str]] = []  # (client name, its token)
        self._servers_seen: tuple | None = None  # the same for the servers, in order
        self._servers: list[PairedDevice] = []

    # --- records ---------------------------------------------------------------------------------
    def list(self, role: str | None = None) -> list[PairedDevice]:
        with self._lock:
            return [d for d in self._read() if role is None or d.role == role]

    def get(self, name: str, role: str) -> PairedDevice:
        for device in self.list(role):
            if device.name == name:
                return device
        raise DeviceError(f"no paired device named {name!r} ({'using this one' if role == CLIENT else 'to use'}): "
                          f"`fireside devices ls` lists them")

    def add(self, device: PairedDevice, token: str) -> PairedDevice:
        """Keep (or replace) a pairing: the token goes to the keyring first, so a keyring that
        cannot keep it leaves no half-paired record behind."""
        check_device_name(device.name)
        device.paired_at = device.paired_at or time.time()
        self.keys.set(f"{device.role}:{device.name}", token)
        with self._lock:
            self._write([d for d in self._read() if (d.name, d.role) != (device.name, device.role)] + [device])
        return device

    def remove(self, name: str, role: str) -> PairedDevice:
        """Forget a pairing and its token. For a ``client`` this is revoking it: its next request is refused."""
        with self._lock:
            devices = self._read()
            found = next((d for d in devices if (d.name, d.role) == (name, role)), None)
            if found is None:
                raise DeviceError(f"no paired device named {name!r}: `fireside devices ls` lists them")
            self._write([d for d in devices if d is not found])
            self._tokens = [(n, t) for n, t in self._tokens if n != name] if role == CLIENT else self._tokens
        self.keys.delete(f"{role}:{name}")
        return found

    def move(self, name: str, address: str) -> PairedDevice:
        """Record that the device this one uses, ``name``, now answers at ``address`` (host:port): it was
        found there again by its pinned certificate (``relocate.py``). Only the address changes."""
        with self._lock:
            devices = self._read()
            found = next((d for d in devices if (d.name, d.role) == (name, SERVER)), None)
            if found is None:
                raise DeviceError(f"no paired device named {name!r} to use: `fireside devices ls` lists them")
            found.address = address
            self._write(devices)
        return found

    # --- which device first --------------------------------------------------------------------
    def order(self) -> list[str]:
        """The devices this one uses, most preferred first: the order the user set, then the rest by name.
        When several serve a model asked for by its bare name, the first that lists it answers."""
        with self._lock:
            return self._order(self._raw())

    def servers(self) -> list[PairedDevice]:
        """The devices this one uses, most preferred first (``order``). Runs on every request to a
        device's model (several times): re-reads the book only when its file changed."""
        with self._lock:
            seen = _stamp(self.path)
            if seen != self._servers_seen:
                raw = self._raw()
                devices = {d.name: d for d in self._devices(raw) if d.role == SERVER}
                self._servers, self._servers_seen = [devices[n] for n in self._order(raw)], seen
            return list(self._servers)

    @classmethod
    def _order(cls, raw: dict) -> list[str]:
        names = sorted(d.name for d in cls._devices(raw) if d.role == SERVER)
        chosen = [n for n in raw.get("order", []) if n in names]
        return chosen + [n for n in names if n not in chosen]

    def set_order(self, names: list[str]) -> list[str]:
        """Prefer the devices in this order (names not paired are left out; those left unnamed go last)."""
        with self._lock:
            raw = self._raw()
            raw["order"] = [n for n in dict.fromkeys(names) if isinstance(n, str)]
            self._write(self._devices(raw), raw["order"])
        return self.order()

    def token(self, device: PairedDevice) -> str | None:
        return self.keys.get(f"{device.role}:{device.name}")

    # --- the shared listener's check -------------------------------------------------------------
    def client_for(self, offered: str | None) -> str | None:
        """The paired client whose token ``offered`` is, or None; compared in constant time. Runs on
        every request to the shared listener: re-reads the book only when its file changed."""
        if not offered:
            return None
        with self._lock:
            seen = _stamp(self.path)
            if seen != self._seen:
                devices = [d for d in self._read() if d.role == CLIENT]
                self._tokens = [(d.name, t) for d in devices if (t := self.keys.get(f"{CLIENT}:{d.name}"))]
                self._seen = seen
            tokens = list(self._tokens)
        found = None
        for name, token in tokens:  # every token is compared, so the time taken says nothing of which matched
            if hmac.compare_digest(offered.encode("utf-8"), token.encode("utf-8")):
                found = name
        return found

    # --- the file --------------------------------------------------------------------------------
    def _raw(self) -> dict:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise DeviceError(f"{self.path} cannot be read ({exc}); fix or delete it (then pair again)") from None
        if not isinstance(raw, dict):
            raise DeviceError(f"{self.path} is not a devices file; fix or delete it (then pair again)")
        return raw

    @staticmethod
    def _devices(raw: dict) -> list[PairedDevice]:
        fields = PairedDevice.__dataclass_fields__
        return [PairedDevice(**{k: v for k, v in d.items() if k in fields}) for d in raw.get("devices", [])
                if isinstance(d, dict) and {"name", "role", "fingerprint"} <= d.keys()]

    def _read(self) -> list[PairedDevice]:
        return self._devices(self._raw())

    def _write(self, devices: list[PairedDevice], order: list[str] | None = None) -> None:
        """Write the devices whole; the preferred order is kept unless a new one is given."""
        if order is None:
            order = self._raw().get("order", []) if self.path.exists() else []
        body = {"devices": [asdict(d) for d in devices], "order": order}
        atomic_write(self.path, json.dumps(body, indent=2) + "\n")
        os.chmod(self.path, 0o600)


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino
