"""The preferred-device order: when several paired devices serve the same model, a request that names the
model without a device (``fireside chat MODEL``, the local API's ``model``) goes to the first of them, in
the order the user set, that lists it; a device that stops answering hands it to the next. Two stand-in
devices here are fake OpenAI servers over TLS with their own certificates, pinned as a pairing would."""

from __future__ import annotations

import httpx
import pytest

from fireside.engine.devices import DeviceBook, Identity
from fireside.engine.devices.book import CLIENT, SERVER, PairedDevice
from fireside.engine.errors import ModelNotFound
from fireside.engine.facade import Engine
from fireside.engine.library import Library
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from fireside.engine.server.sharing import PAIRING_PATHS
from fireside.engine.settings import Settings
from tests.helpers.fakeopenai import Behaviour, start_fake_server
from tests.helpers.keyrings import DictKeys


@pytest.fixture
def devices(tmp_path):
    """This device's settings and book, with ``attic`` and ``desk`` paired; each serves ``fake-model`` and a
    ``starter`` of its own (attic stops after 2 tokens, desk after 3, so a reply says who answered)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "me")})
    settings.ensure_dirs()
    book = DeviceBook(settings, keys=DictKeys())
    fakes = {}
    for name, tokens in (("attic", 2), ("desk", 3)):
        home = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / name)})
        identity = Identity.load_or_create(home, name)
        fakes[name] = start_fake_server(Behaviour(stop_after=tokens, interval_s=0.001, models=("fake-model", "starter")),
                                        graceful_s=0.5,
                                        ssl_certfile=str(identity.cert_path), ssl_keyfile=str(identity.key_path))
        book.add(PairedDevice(name, SERVER, identity.fingerprint, cert_pem=identity.cert_pem,
                              address=f"127.0.0.1:{fakes[name].port}"), f"token-{name}")
    remotes = RemoteEngine(settings, RemoteRegistry(settings, keys=DictKeys()), book)
    yield settings, book, remotes, fakes
    remotes.close()
    for fake in fakes.values():
        fake.stop()


def test_the_order_is_by_name_until_set_and_survives_pairings_and_removals(devices):
    _, book, _, _ = devices
    assert book.order() == ["attic", "desk"]
    assert book.set_order(["desk", "nowhere"]) == ["desk", "attic"]
    book.add(PairedDevice("laptop", CLIENT, "cd" * 32), "t")  # a device using this one: not in the order
    book.add(PairedDevice("basement", SERVER, "ef" * 32, address="127.0.0.1:1"), "t")
    assert book.order() == ["desk", "attic", "basement"]
    book.remove("desk", SERVER)
    assert book.order() == ["attic", "basement"]


def test_a_bare_model_name_goes_to_the_preferred_device_and_on_when_it_goes_away(devices):
    _, book, remotes, fakes = devices
    assert remotes.device_for("fake-model") == "attic/fake-model"
    book.set_order(["desk", "attic"])
    assert remotes.device_for("fake-model") == "desk/fake-model"
    assert remotes.device_for("no-such-model") is None
    fakes["desk"].stop()
    remotes.statuses(fresh=True)
    assert remotes.device_for("fake-model") == "attic/fake-model"


def test_the_local_api_routes_a_bare_name_to_the_preferred_device_but_a_local_model_first(devices):
    settings, book, remotes, _ = devices
    library = Library(settings)
    engine = Engine(settings, resolver=lambda ref: library.get(ref).path, remotes=remotes)
    server = ServerThread(create_app(engine, settings, library), "127.0.0.1", 0)
    server.start()
    try:
        def ask(model: str) -> httpx.Response:
            return httpx.post(f"{server.url}/v1/chat/completions", timeout=30,
                              json={"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]})

        book.set_order(["desk", "attic"])
        assert ask("fake-model").json()["usage"]["completion_tokens"] == 3  # desk answered
        book.set_order(["attic", "desk"])
        assert ask("fake-model").json()["usage"]["completion_tokens"] == 2  # attic answered
        assert ask("no-such-model").status_code == 404
        assert engine.device_for("starter") == "attic/starter"  # the devices have one ...
        assert server.app.state.fireside.resolve("starter") == "starter"  # ... but this machine's answers
        policy = SecurityPolicy(bind_host="127.0.0.1", port=0, device_of=lambda _token: None, open_paths=PAIRING_PATHS)
        shared = create_app(engine, settings, library, policy=policy, shared=True).state.fireside
        with pytest.raises(ModelNotFound):  # a paired device asking this one is never relayed to a third
            shared.resolve("fake-model")
    finally:
        server.stop()


def test_fireside_devices_order_sets_and_shows_the_order(tmp_path):
    import os

    from tests.helpers.cli import fireside

    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    settings.ensure_dirs()
    book = DeviceBook(settings, keys=DictKeys())
    for name in ("attic", "desk"):
        book.add(PairedDevice(name, SERVER, "ab" * 32, address="127.0.0.1:1"), "t")
    env = {**os.environ, "FIRESIDE_HOME": str(tmp_path)}
    done = fireside("devices", "order", "desk", env=env)
    assert done.returncode == 0 and "preferred order: desk, attic" in done.stdout
    assert book.order() == ["desk", "attic"]
    refused = fireside("devices", "order", "ghost", env=env)
    assert refused.returncode != 0 and "ghost" in refused.stderr and book.order() == ["desk", "attic"]
