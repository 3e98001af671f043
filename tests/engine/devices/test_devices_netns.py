"""Two Fireside devices in their own network namespaces, joined by a veth pair: ``alpha`` shares
(``fireside serve --share``), ``beta`` finds it by mDNS, pairs with the code alpha shows, and uses its
model through beta's own local API with the official ``openai`` client. Everything crosses a real
network stack (multicast DNS, TCP, TLS); no address outside the two namespaces is used.

The module's tests share the two running servers and run in file order: found, closed to strangers,
wrong codes refused, paired, used, alpha killed mid-reply (and started again), revoked, an impostor
(another certificate) refused, and last beta forgetting alpha.
"""

from __future__ import annotations

import contextlib
import json
import time

import pytest

from tests.helpers import netns
from tests.helpers.waiting import free_port

pytestmark = pytest.mark.timeout(240)
SHARE_PORT = 18766
STARTER = "starter"


@pytest.fixture(scope="module")
def network():
    reason = netns.why_not()
    if reason:
        pytest.skip(f"two devices need network namespaces: {reason}")
    with netns.namespaces() as (a, b):
        yield a, b


@pytest.fixture(scope="module")
def devices(network, tmp_path_factory):
    (ns_a, ip_a), (ns_b, _) = network
    home = tmp_path_factory.mktemp("devices")
    alpha, beta = netns.Device(ns_a, home / "alpha"), netns.Device(ns_b, home / "beta")
    port_a, port_b = free_port(), free_port()
    with contextlib.ExitStack() as on_alpha, beta.serve("--port", str(port_b)):
        def start_alpha():
            on_alpha.enter_context(alpha.serve("--port", str(port_a), "--share", "--share-port", str(SHARE_PORT),
                                               "--name", "alpha"))

        start_alpha()
        yield {"alpha": alpha, "beta": beta, "ip_a": ip_a, "port_a": port_a, "port_b": port_b,
               "start_alpha": start_alpha, "stop_alpha": on_alpha.close}


def _code(d) -> str:
    done = d["alpha"].run("devices", "code", "--port", str(d["port_a"]))
    assert done.returncode == 0, done.stderr
    return done.stdout.split("pairing code: ")[1].split()[0]


def _book(device: netns.Device) -> dict:
    return {(e["name"], e["role"]): e for e in json.loads((device.home / "config" / "devices.json").read_text())["devices"]}


def _keys(device: netns.Device) -> dict:
    return json.loads((device.home / "keys.json").read_text())


def test_a_sharing_device_is_found_by_mdns_within_5_s(devices):
    from fireside.engine.devices.announce import browse
    from fireside.engine.devices.identity import fingerprint_of_pem

    started = time.monotonic()
    found = netns.in_netns(devices["beta"].ns, browse, 5.0, "alpha")
    took = time.monotonic() - started
    alpha = next(f for f in found if f.name == "alpha")
    assert took < 5.0 and devices["ip_a"] in alpha.addresses and alpha.port == SHARE_PORT
    cert = (devices["alpha"].home / "data" / "devices" / "device-cert.pem").read_text()
    assert alpha.fingerprint == fingerprint_of_pem(cert)  # the announced fingerprint is the certificate's own


def test_nothing_is_reachable_on_the_shared_listener_without_a_pairing(devices):
    import httpx

    def ask(path: str) -> int:
        with httpx.Client(verify=False, timeout=5) as http:
            return http.get(f"https://{devices['ip_a']}:{SHARE_PORT}{path}").status_code

    for path in ("/v1/models", "/api/tags", "/docs", "/", "/openapi.json"):
        assert netns.in_netns(devices["beta"].ns, ask, path) == 401, path
    with pytest.raises(httpx.HTTPError):  # the loopback listener is not on the network at all
        netns.in_netns(devices["beta"].ns, lambda: httpx.get(f"http://{devices['ip_a']}:{devices['port_a']}/", timeout=2))


def test_a_wrong_code_is_refused_and_the_tries_are_limited(devices, tmp_path):
    from fireside.engine.devices import DeviceBook, Identity
    from fireside.engine.devices.pairing import pair
    from fireside.engine.errors import DeviceError
    from fireside.engine.settings import Settings

    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})  # a third install, in beta's namespace
    book, me = DeviceBook(settings), Identity.load_or_create(settings, "mallory")

    def attempt(code: str) -> str:
        try:
            pair(book, me, "mallory", "alpha", devices["ip_a"], SHARE_PORT, code)
        except DeviceError as exc:
            return str(exc)
        return "paired"

    code = _code(devices)
    wrong = f"{(int(code.replace('-', '')) + 1) % 10**6:06d}"
    refusals = [netns.in_netns(devices["beta"].ns, attempt, wrong) for _ in range(3)]
    assert [("wrong pairing code" in r, f"{n} tr" in r) for r, n in zip(refusals, (2, 1, 0))] == [(True, True)] * 3, refusals
    last = devices["beta"].run("devices", "pair", "alpha", "--address", f"{devices['ip_a']}:{SHARE_PORT}",
                               "--code", code, "--as", "mallory")  # the right code, by the CLI, once the tries are spent
    assert last.returncode == 1 and "no pairing code is open" in last.stderr
    assert book.list() == [] and not (devices["beta"].home / "config" / "devices.json").exists()
    assert not (devices["alpha"].home / "config" / "devices.json").exists()


def test_pairing_with_the_right_code_pins_both_certificates_and_shares_a_token(devices):
    from fireside.engine.devices.identity import fingerprint_of_pem

    done = devices["beta"].run("devices", "pair", "alpha", "--code", _code(devices), "--as", "beta")  # found by mDNS
    assert done.returncode == 0, done.stderr
    cert = {n: (devices[n].home / "data" / "devices" / "device-cert.pem").read_text() for n in ("alpha", "beta")}
    on_beta, on_alpha = _book(devices["beta"])[("alpha", "server")], _book(devices["alpha"])[("beta", "client")]
    assert on_beta["fingerprint"] == fingerprint_of_pem(cert["alpha"]) and on_beta["cert_pem"] == cert["alpha"]
    assert on_alpha["fingerprint"] == fingerprint_of_pem(cert["beta"])
    token_b, token_a = _keys(devices["beta"])["Fireside devices\0server:alpha"], _keys(devices["alpha"])["Fireside devices\0client:beta"]
    assert token_a == token_b and len(token_a) >= 40
    assert token_a not in (devices["beta"].home / "config" / "devices.json").read_text()  # the token lives in the keyring only


def _openai(device_port: int):
    from openai import OpenAI

    return OpenAI(base_url=f"http://127.0.0.1:{device_port}/v1", api_key="unused", max_retries=0, timeout=60)


def test_a_chat_through_the_other_devices_model_with_the_openai_client(devices):
    def chat():
        client = _openai(devices["port_b"])
        listed = [m.id for m in client.models.list()]
        reply = client.chat.completions.create(model=f"alpha/{STARTER}", max_tokens=12, temperature=0, seed=1,
                                               messages=[{"role": "user", "content": "Name a colour."}])
        pieces = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
            model=f"alpha/{STARTER}", max_tokens=12, temperature=0, seed=1, stream=True,
            messages=[{"role": "user", "content": "Name a colour."}]) if c.choices]
        return listed, reply, "".join(pieces)

    listed, reply, streamed = netns.in_netns(devices["beta"].ns, chat)
    assert f"alpha/{STARTER}" in listed and STARTER in listed
    assert reply.model == f"alpha/{STARTER}" and reply.choices[0].message.content.strip()
    assert reply.usage.completion_tokens > 0
    assert streamed == reply.choices[0].message.content  # greedy: the same reply, streamed


def _ask(devices) -> str:
    import openai

    try:
        _openai(devices["port_b"]).chat.completions.create(model=f"alpha/{STARTER}", max_tokens=4,
                                                           messages=[{"role": "user", "content": "Hi"}])
    except openai.APIError as exc:
        return str(exc)
    return "answered"


def test_the_other_device_stopping_mid_reply_ends_the_stream_with_a_clear_error(devices):
    """alpha dies while streaming to beta's client: the text already sent arrived, and the stream ends with
    an error naming the device, not a normal finish (a cut reply must not pass for a whole one)."""
    import openai

    def stream():
        pieces, error = [], None
        try:
            for chunk in _openai(devices["port_b"]).chat.completions.create(
                    model=f"alpha/{STARTER}", max_tokens=4000, stream=True, temperature=1.0, seed=3,
                    messages=[{"role": "user", "content": "Write a very long story about a lighthouse."}]):
                text = chunk.choices[0].delta.content if chunk.choices else None
                if text:
                    pieces.append(text)
                    if len(pieces) == 5:
                        devices["alpha"].crash()
        except openai.APIError as exc:
            error = str(exc)
        return pieces, error

    try:
        pieces, error = netns.in_netns(devices["beta"].ns, stream)
    finally:
        if devices["alpha"].proc.poll() is not None:  # alpha again, for the tests after this one (same home and
            devices["start_alpha"]()                   # certificate); not when the stream failed before the crash
    assert len(pieces) >= 5, error  # alone (-k), unpaired: beta has no model "alpha/starter"
    assert error is not None and "alpha" in error and "mid-reply" in error, error


def test_a_revoked_device_is_refused_within_1_s(devices):
    assert netns.in_netns(devices["beta"].ns, _ask, devices) == "answered"
    done = devices["alpha"].run("devices", "revoke", "beta")
    assert done.returncode == 0, done.stderr
    revoked_at = time.monotonic()
    refused = netns.in_netns(devices["beta"].ns, _ask, devices)
    took = time.monotonic() - revoked_at
    assert "revoked" in refused and "401" in refused, refused
    assert took < 1.0, f"the first request after revoking took {took:.2f} s to be refused"


def test_a_server_answering_with_another_certificate_is_refused(devices):
    """alpha's address and port, but another install (another certificate) answering and announcing the
    name alpha, with the same model: beta refuses it at the TLS handshake, before any token is sent."""
    devices["stop_alpha"]()
    impostor = netns.Device(devices["alpha"].ns, devices["alpha"].home.parent / "impostor")
    with impostor.serve("--port", str(free_port()), "--share", "--share-port", str(SHARE_PORT), "--name", "alpha"):
        refused = netns.in_netns(devices["beta"].ns, _ask, devices)
    assert "certificate other than the one pinned" in refused, refused


def test_ls_shows_the_pairing_and_rm_forgets_it(devices):
    """Last: beta lists alpha as a device it uses; after `rm`, alpha's models are gone from beta's API at once."""
    import openai

    listed = devices["beta"].run("devices", "ls", "--json", "--listen", "0")
    assert listed.returncode == 0, listed.stderr
    (alpha,) = json.loads(listed.stdout)["paired"]
    assert (alpha["name"], alpha["role"], alpha["address"]) == ("alpha", "server", f"{devices['ip_a']}:{SHARE_PORT}")
    assert devices["beta"].run("devices", "rm", "alpha").returncode == 0
    assert json.loads(devices["beta"].run("devices", "ls", "--json", "--listen", "0").stdout)["paired"] == []
    assert "Fireside devices\0server:alpha" not in _keys(devices["beta"])

    def after():
        client = _openai(devices["port_b"])
        try:
            client.chat.completions.create(model=f"alpha/{STARTER}", max_tokens=4,
                                           messages=[{"role": "user", "content": "Hi"}])
        except openai.NotFoundError as exc:
            return [m.id for m in client.models.list()], str(exc)
        return [], "answered"

    models, refused = netns.in_netns(devices["beta"].ns, after)
    assert "no model named 'alpha/starter'" in refused and not any(m.startswith("alpha/") for m in models)
