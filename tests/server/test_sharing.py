"""The shared listener's app (``fireside serve --share``) beside the loopback one, over real HTTP on
loopback: only paired devices' tokens get in, it serves this machine's own models and never its remote
engines (no relaying), and a pairing code can be opened on loopback only. The same over TLS between two
network namespaces is in ``tests/engine/devices/test_devices_netns.py``."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from fireside.engine.devices import DeviceBook, Identity
from fireside.engine.devices.book import CLIENT, PairedDevice
from fireside.engine.devices.pairing import PairingDesk, pair
from fireside.engine.facade import Engine
from fireside.engine.library import Library
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from fireside.engine.server.h11guard import GuardedH11Protocol
from fireside.engine.server.shared import Share, Sharing
from fireside.engine.server.sharing import PAIRING_PATHS
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.keyrings import DictKeys
from tests.helpers.waiting import closed_port_url

TOKEN = "beta-token-0123456789"
CHAT = {"model": "remote/second/some-model", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}


@pytest.fixture
def listeners(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    settings.ensure_dirs()
    registry = RemoteRegistry(settings, keys=DictKeys())
    registry.add("second", closed_port_url())  # a remote engine of this machine's own
    library = Library(settings)
    engine = Engine(settings, resolver=lambda ref: library.get(ref).path, remotes=RemoteEngine(settings, registry))
    book = DeviceBook(settings)
    book.add(PairedDevice("beta", CLIENT, "ab" * 32), TOKEN)
    desk = PairingDesk(book, Identity.load_or_create(settings, "alpha"), "alpha")
    policy = SecurityPolicy(bind_host="127.0.0.1", port=0, device_of=book.client_for, open_paths=PAIRING_PATHS)
    shared = ServerThread(create_app(engine, settings, library, policy=policy, pairing=desk, shared=True), "127.0.0.1", 0)
    local = ServerThread(create_app(engine, settings, library, pairing=desk), "127.0.0.1", 0)
    shared.start()
    local.start()
    yield shared.url, local.url, book
    shared.stop()
    local.stop()
    engine.close()


def test_only_a_paired_devices_token_gets_in_and_a_revoke_shuts_it_out(listeners):
    shared, _, book = listeners
    assert httpx.get(f"{shared}/v1/models").status_code == 401
    assert httpx.get(f"{shared}/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
    ok = httpx.get(f"{shared}/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200 and "starter" in [m["id"] for m in ok.json()["data"]]
    book.remove("beta", CLIENT)
    gone = httpx.get(f"{shared}/v1/models", headers={"Authorization": f"Bearer {TOKEN}"})
    assert gone.status_code == 401 and gone.json()["error"]["code"] == "device_not_paired"


def test_the_shared_listener_never_relays_to_this_machines_remote_engines(listeners):
    shared, local, _ = listeners
    relayed = httpx.post(f"{local}/v1/chat/completions", json=CHAT)  # loopback: forwarded (to a dead remote)
    assert relayed.status_code >= 500 and "cannot be reached" in relayed.text
    refused = httpx.post(f"{shared}/v1/chat/completions", json=CHAT, headers={"Authorization": f"Bearer {TOKEN}"})
    assert refused.status_code == 404 and "on this device" in refused.text


def test_a_connection_without_a_paired_devices_token_is_closed_after_its_answer(listeners):
    """Only paired devices' connections are kept open between requests (for ``LINK_IDLE_S``): a refused
    one, or a pairing step, is answered and closed, so nobody unpaired holds a connection idle."""
    shared, _, _ = listeners
    port = int(shared.rpartition(":")[2])
    for token, status, closed in ((None, b"401", True), ("wrong", b"401", True), (TOKEN, b"200", False)):
        with socket.create_connection(("127.0.0.1", port), timeout=3.0) as conn:
            auth = f"Authorization: Bearer {token}\r\n".encode() if token else b""
            conn.sendall(b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n" + auth + b"\r\n")
            head = conn.recv(65536)
            assert head.split(b" ")[1] == status and (b"connection: close" in head.lower()) == closed
            conn.settimeout(0.5)
            try:
                gone = conn.recv(1) == b""
            except TimeoutError:
                gone = False
            assert gone == closed


@pytest.fixture
def paired(tmp_path):
    """alpha sharing over TLS on loopback as ``fireside serve --share`` does (no mDNS), and beta's remote
    engine paired with it by the real exchange."""
    homes = {name: Settings.from_env({"FIRESIDE_HOME": str(tmp_path / name)}) for name in ("alpha", "beta")}
    for settings in homes.values():
        settings.ensure_dirs()
    remotes = {name: RemoteEngine(settings, RemoteRegistry(settings, keys=DictKeys()), DeviceBook(settings, keys=DictKeys()))
               for name, settings in homes.items()}
    library = Library(homes["alpha"])
    alpha = Engine(homes["alpha"], resolver=lambda ref: library.get(ref).path, remotes=remotes["alpha"])
    sharing = Sharing(homes["alpha"], Share(host="127.0.0.1", port=0, name="alpha", announce=False), alpha, library)
    sharing.start()
    code, _ = sharing.desk.open_code()
    pair(remotes["beta"].devices, Identity.load_or_create(homes["beta"], "beta"), "beta", "alpha", "127.0.0.1",
         sharing.server.port, code)
    yield remotes["beta"], sharing
    remotes["beta"].close()
    sharing.stop()
    alpha.close()


def test_a_paired_devices_connection_is_kept_between_chats(paired, monkeypatch):
    """A pause between two chats longer than uvicorn's and httpx's usual 5 s keep-alive: the second chat
    still goes over the first one's TLS connection, so its first token waits on no new handshake."""
    beta, sharing = paired
    opened = []
    made = GuardedH11Protocol.connection_made

    def counting(protocol, transport):
        if transport.get_extra_info("sockname")[1] == sharing.server.port:
            opened.append(transport)
        made(protocol, transport)

    monkeypatch.setattr(GuardedH11Protocol, "connection_made", counting)
    request = ChatRequest(messages=[{"role": "user", "content": "Hi"}], sampling=Sampling(max_tokens=3, seed=1))
    replies = []
    for pause in (0.0, 6.0):
        time.sleep(pause)
        replies.append([c.kind for c in beta.chat("alpha/starter", request)])
    assert all(kinds[-1] == "done" and "text" in kinds for kinds in replies)
    assert len(opened) == 1


def test_a_pairing_code_opens_on_loopback_only(listeners):
    shared, local, _ = listeners
    opened = httpx.post(f"{local}/fireside/pair/code")
    assert opened.status_code == 200 and len(opened.json()["code"].replace("-", "")) == 6
    assert httpx.post(f"{shared}/fireside/pair/code").status_code == 401
    assert httpx.post(f"{shared}/fireside/pair/code", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 404
    assert httpx.post(f"{local}/fireside/pair/start", json={"name": "x", "fingerprint": "y", "message": "z"}).status_code == 404


def test_a_paired_device_uses_the_models_but_never_sees_this_machines_documents(listeners):
    shared, local, _ = listeners
    auth = {"Authorization": f"Bearer {TOKEN}"}
    uploaded = httpx.post(f"{local}/v1/files", files={"file": ("diary.md", b"# Diary\nMy secret plans.\n")},
                          data={"purpose": "assistants"})
    assert uploaded.status_code == 200, uploaded.text
    store = httpx.post(f"{local}/v1/vector_stores", json={"name": "mine", "file_ids": [uploaded.json()["id"]]}).json()
    assert httpx.get(f"{shared}/v1/files", headers=auth).status_code == 404
    assert httpx.get(f"{shared}/v1/files/{uploaded.json()['id']}/content", headers=auth).status_code == 404
    assert httpx.post(f"{shared}/v1/vector_stores/{store['id']}/search", json={"query": "plans"},
                      headers=auth).status_code == 404
    asked = httpx.post(f"{shared}/v1/responses", headers=auth, json={
        "model": "starter", "input": "What are my plans?", "max_output_tokens": 4,
        "tools": [{"type": "file_search", "vector_store_ids": [store["id"]]}]})
    assert asked.status_code == 400 and "not offered to paired devices" in asked.json()["error"]["message"]
