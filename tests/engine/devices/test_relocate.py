"""Finding a moved device again, in one process: real TLS listeners on loopback presenting a device's
certificate (or an impostor's), and what mDNS heard passed in through ``Relocator``'s ``browse`` seam
(mDNS itself, and the whole flow through the local API, run over veth in ``test_relocate_netns.py``)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading

import pytest

from fireside.engine.devices import DeviceBook, Identity
from fireside.engine.devices.announce import Found
from fireside.engine.devices.book import SERVER, PairedDevice
from fireside.engine.devices.relocate import Relocator
from fireside.engine.errors import DeviceError
from fireside.engine.settings import Settings
from tests.helpers.keyrings import DictKeys


@contextlib.contextmanager
def tls_listener(identity: Identity):
    """A loopback port that completes TLS handshakes with ``identity``'s certificate; yields the port."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(identity.cert_path, identity.key_path)
    sock = socket.create_server(("127.0.0.1", 0))
    sock.settimeout(0.1)  # closing a socket does not wake a blocked accept: poll the stop flag
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            with contextlib.suppress(OSError), ctx.wrap_socket(conn, server_side=True):
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        sock.close()


@pytest.fixture
def world(tmp_path):
    alpha = Identity.load_or_create(Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "alpha")}), "alpha")
    impostor = Identity.load_or_create(Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "impostor")}), "alpha")
    book = DeviceBook(Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "beta")}), keys=DictKeys())
    book.add(PairedDevice("alpha", SERVER, alpha.fingerprint, alpha.cert_pem, "127.0.0.1:9"), "token")
    return alpha, impostor, book


class Heard:
    """The ``browse`` seam: what mDNS "hears", and how often it was asked."""

    def __init__(self, found: list[Found]):
        self.found, self.calls = found, 0

    def __call__(self, timeout: float, fingerprint: str | None = None) -> list[Found]:
        self.calls += 1
        return self.found


def test_a_device_heard_by_its_fingerprint_at_a_new_address_is_moved_there(world):
    alpha, _, book = world
    with tls_listener(alpha) as port:
        heard = Heard([Found("renamed", ("127.0.0.1",), port, alpha.fingerprint)])  # a name is not what matches
        moved = Relocator(book, browse=heard).find(book.get("alpha", SERVER))
    assert moved.address == f"127.0.0.1:{port}" and book.get("alpha", SERVER).address == f"127.0.0.1:{port}"
    assert book.get("alpha", SERVER).fingerprint == alpha.fingerprint and book.token(moved) == "token"


def test_the_name_or_a_forged_fingerprint_with_another_certificate_is_refused(world):
    alpha, impostor, book = world
    with tls_listener(impostor) as port:
        heard = Heard([Found("alpha", ("127.0.0.1",), port, impostor.fingerprint),  # the name, its own certificate
                       Found("alpha", ("127.0.0.1",), port, alpha.fingerprint)])  # alpha's fingerprint, forged
        with pytest.raises(DeviceError) as refused:
            Relocator(book, browse=heard).find(book.get("alpha", SERVER))
    assert "with another certificate; refused" in str(refused.value)
    assert f"127.0.0.1:{port} did not present its certificate; refused" in str(refused.value)
    assert book.get("alpha", SERVER).address == "127.0.0.1:9"


def test_a_device_not_found_is_not_looked_for_again_at_once(world):
    _, _, book = world
    heard = Heard([])
    relocator = Relocator(book, browse=heard)
    for _ in range(3):
        with pytest.raises(DeviceError, match="not heard|not found"):
            relocator.find(book.get("alpha", SERVER))
    assert heard.calls == 1  # a device that is really off costs one look, not one per request


def test_update_moves_only_devices_heard_elsewhere_that_prove_it(world):
    alpha, impostor, book = world
    with tls_listener(alpha) as good, tls_listener(impostor) as bad:
        relocator = Relocator(book)
        assert relocator.update([Found("alpha", ("127.0.0.1",), bad, alpha.fingerprint)]) == []
        assert book.get("alpha", SERVER).address == "127.0.0.1:9"
        ((moved, old),) = relocator.update([Found("alpha", ("127.0.0.1",), good, alpha.fingerprint)])
        assert (moved.address, old) == (f"127.0.0.1:{good}", "127.0.0.1:9")
        assert relocator.update([Found("alpha", ("127.0.0.1",), good, alpha.fingerprint)]) == []  # already there
