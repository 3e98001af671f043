"""A paired device that moved is found again by its certificate, and only by it: two Fireside devices in
their own network namespaces joined by veth (``tests/helpers/netns.py``). ``alpha`` shares, ``beta``
pairs with it and uses its model through beta's local API with the official ``openai`` client; then
alpha comes back on another share port (what a changed port or a new DHCP address looks like to beta).

The module's tests share the running servers and run in file order: moved and found again by the
request itself; an impostor (the name alpha, another certificate, and a forged announcement of
alpha's fingerprint) never used; moved again and found by ``fireside devices ls``.
"""

from __future__ import annotations

import contextlib
import json

import pytest

from tests.helpers import netns
from tests.helpers.waiting import free_port

pytestmark = pytest.mark.timeout(300)
PORTS = (18771, 18772, 18773, 18774)  # alpha's share ports, one per move; the impostor's is the third
STARTER = "starter"


@pytest.fixture(scope="module")
def devices(tmp_path_factory):
    reason = netns.why_not()
    if reason:
        pytest.skip(f"two devices need network namespaces: {reason}")
    home = tmp_path_factory.mktemp("relocate")
    with netns.namespaces() as ((ns_a, ip_a), (ns_b, _)), contextlib.ExitStack() as on_alpha:
        alpha, beta = netns.Device(ns_a, home / "alpha"), netns.Device(ns_b, home / "beta")
        port_a, port_b = free_port(), free_port()

        def start_alpha(share_port: int) -> None:
            on_alpha.enter_context(alpha.serve("--port", str(port_a), "--share", "--share-port", str(share_port),
                                               "--name", "alpha"))

        with beta.serve("--port", str(port_b)):
            start_alpha(PORTS[0])
            code = alpha.run("devices", "code", "--port", str(port_a))
            assert code.returncode == 0, code.stderr
            paired = beta.run("devices", "pair", "alpha", "--code", code.stdout.split("pairing code: ")[1].split()[0],
                              "--as", "beta")
            assert paired.returncode == 0, paired.stderr
            yield {"alpha": alpha, "beta": beta, "ip_a": ip_a, "port_b": port_b,
                   "start_alpha": start_alpha, "stop_alpha": on_alpha.close}


def _address(device: netns.Device) -> str:
    book = json.loads((device.home / "config" / "devices.json").read_text())["devices"]
    return next(e["address"] for e in book if (e["name"], e["role"]) == ("alpha", "server"))


def _chat(devices) -> str:
    """One chat with alpha's model through beta's local API, from beta's namespace: the reply, or the error."""
    import openai

    def ask() -> str:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{devices['port_b']}/v1", api_key="unused", max_retries=0,
                               timeout=60)
        try:
            reply = client.chat.completions.create(model=f"alpha/{STARTER}", max_tokens=8, temperature=0, seed=1,
                                                   messages=[{"role": "user", "content": "Name a colour."}])
        except openai.APIError as exc:
            return f"error: {exc}"
        return reply.choices[0].message.content or ""

    return netns.in_netns(devices["beta"].ns, ask)


def test_a_device_back_on_another_port_is_found_by_its_certificate_and_used(devices):
    assert _chat(devices).strip() and not _chat(devices).startswith("error")
    assert _address(devices["beta"]) == f"{devices['ip_a']}:{PORTS[0]}"
    devices["stop_alpha"]()
    devices["start_alpha"](PORTS[1])  # the same install (same certificate), another port
    reply = _chat(devices)
    assert reply.strip() and not reply.startswith("error"), reply  # before: "cannot be reached" until paired again
    assert _address(devices["beta"]) == f"{devices['ip_a']}:{PORTS[1]}"


def test_an_impostor_with_the_name_and_a_forged_fingerprint_is_never_used(devices):
    """alpha is gone; another install shares as "alpha" (its own certificate), and a forged announcement
    carries alpha's real fingerprint and the impostor's address. The request fails, saying the announcement
    was refused; no token reaches the impostor and the book keeps alpha's last address."""
    from fireside.engine.devices.announce import Announcer, browse

    real = next(f for f in netns.in_netns(devices["beta"].ns, browse, 5.0, "alpha") if f.name == "alpha")
    devices["stop_alpha"]()
    impostor = netns.Device(devices["alpha"].ns, devices["alpha"].home.parent / "impostor")
    with impostor.serve("--port", str(free_port()), "--share", "--share-port", str(PORTS[2]), "--name", "alpha"):
        forged = netns.in_netns(devices["alpha"].ns, Announcer, "alpha", PORTS[2], real.fingerprint, [devices["ip_a"]])
        try:
            refused = _chat(devices)
        finally:
            forged.close()
    assert refused.startswith("error") and "refused" in refused, refused
    # whichever announcement mDNS brought first is named: the forged one (its address did not present
    # alpha's certificate) or the impostor's own (the name alpha with another certificate)
    assert (f"{devices['ip_a']}:{PORTS[2]} did not present its certificate" in refused
            or f"'alpha' was heard at {devices['ip_a']}:{PORTS[2]} with another certificate" in refused), refused
    assert _address(devices["beta"]) == f"{devices['ip_a']}:{PORTS[1]}"


def test_devices_ls_moves_a_device_heard_at_a_new_address(devices):
    devices["start_alpha"](PORTS[3])
    listed = devices["beta"].run("devices", "ls", "--json", "--listen", "3")
    assert listed.returncode == 0, listed.stderr
    moved = json.loads(listed.stdout)["moved"]
    assert moved == [{"name": "alpha", "from": f"{devices['ip_a']}:{PORTS[1]}", "to": f"{devices['ip_a']}:{PORTS[3]}"}]
    assert _address(devices["beta"]) == f"{devices['ip_a']}:{PORTS[3]}"
    reply = _chat(devices)  # beta's server, which looked for alpha lately and did not find it, reads the new address
    assert reply.strip() and not reply.startswith("error"), reply
