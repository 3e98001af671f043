"""Pairing and the device book in one process, without a network: the PAKE exchange's refusals (a
wrong code, a man in the middle that showed the pairing side another certificate, an expired code),
the identity kept across restarts with its key private, and a revoke seen by another process's book.
The same flows over a real network stack are in ``test_devices_netns.py``."""

from __future__ import annotations

import base64
import os
import stat
import time

import pytest

from fireside.engine.devices import DeviceBook, Identity
from fireside.engine.devices.book import CLIENT, PairedDevice
from fireside.engine.devices.pairing import (
    ID_CLIENT,
    ID_SERVER,
    PairingDesk,
    _transcript,
    confirmation,
    derive_token,
)
from fireside.engine.errors import DeviceError
from fireside.engine.settings import Settings


@pytest.fixture
def desk(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "sharer")})
    return PairingDesk(DeviceBook(settings), Identity.load_or_create(settings, "alpha"), "alpha")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


def _exchange(desk: PairingDesk, code: str, seen_fingerprint: str | None = None, me: str = "beta"):
    """The pairing side's two steps against ``desk``; ``seen_fingerprint`` is the sharer's certificate
    as this side saw it (another one: a man in the middle terminated its TLS)."""
    from spake2 import SPAKE2_A

    spake = SPAKE2_A(code.encode(), idA=ID_CLIENT, idB=ID_SERVER)
    msg_c = spake.start()
    started = desk.start(me, "ab" * 32, _b64(msg_c))
    msg_s = base64.urlsafe_b64decode(started["message"])
    key = spake.finish(msg_s)
    seen = seen_fingerprint or desk.identity.fingerprint
    transcript = _transcript(me, started["name"], seen, "ab" * 32, msg_c, msg_s)
    done = desk.finish(started["session"], _b64(confirmation(key, b"client", transcript)))
    return key, transcript, done


def test_the_right_code_pairs_once_and_both_sides_hold_the_same_token(desk):
    code, _ = desk.open_code()
    key, transcript, done = _exchange(desk, code)
    assert base64.urlsafe_b64decode(done["confirm"]) == confirmation(key, b"server", transcript)
    (client,) = desk.book.list(CLIENT)
    assert client.name == "beta" and client.fingerprint == "ab" * 32
    assert desk.book.token(client) == derive_token(key, desk.identity.fingerprint, "ab" * 32)
    with pytest.raises(DeviceError, match="no pairing code is open"):  # one-time: gone once used
        _exchange(desk, code, me="gamma")


def test_a_man_in_the_middle_with_the_right_code_is_still_refused(desk):
    """The pairing side saw another certificate (an attacker relaying between the two): the confirmation
    binds what it saw, so the sharer refuses, and keeps nothing."""
    code, _ = desk.open_code()
    with pytest.raises(DeviceError, match="wrong pairing code"):
        _exchange(desk, code, seen_fingerprint="cd" * 32)
    assert desk.book.list() == []


def test_wrong_codes_spend_the_tries_and_then_the_code_is_gone(desk):
    code, _ = desk.open_code()
    wrong = f"{(int(code) + 1) % 10**6:06d}"
    for left in (2, 1, 0):
        with pytest.raises(DeviceError, match=f"{left} tr"):
            _exchange(desk, wrong)
    with pytest.raises(DeviceError, match="no pairing code is open"):
        _exchange(desk, code)
    assert desk.book.list() == []


def test_an_expired_code_is_refused(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    desk = PairingDesk(DeviceBook(settings), Identity.load_or_create(settings, "alpha"), "alpha", valid_s=0.05)
    code, _ = desk.open_code()
    time.sleep(0.1)
    with pytest.raises(DeviceError, match="expired"):
        _exchange(desk, code)


def test_the_identity_is_kept_across_restarts_and_its_key_is_private(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    first = Identity.load_or_create(settings, "alpha")
    again = Identity.load_or_create(settings, "alpha")
    assert first.fingerprint == again.fingerprint and len(first.fingerprint) == 64
    assert stat.S_IMODE(os.stat(first.key_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(first.key_path.parent).st_mode) == 0o700


def test_a_revoke_by_another_process_is_seen_on_the_next_check(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    server, cli = DeviceBook(settings), DeviceBook(settings)  # the running server's book, and the CLI's
    cli.add(PairedDevice("beta", CLIENT, "ab" * 32), "token-beta")
    cli.add(PairedDevice("gamma", CLIENT, "cd" * 32), "token-gamma")
    assert server.client_for("token-beta") == "beta" and server.client_for("token-gamma") == "gamma"
    assert server.client_for("token-nobody") is None and server.client_for(None) is None
    cli.remove("beta", CLIENT)
    assert server.client_for("token-beta") is None
    assert server.client_for("token-gamma") == "gamma"
