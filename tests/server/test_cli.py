"""``fireside serve``: refuses the network without a key, reports a taken port, keeps the key in the keyring."""

from __future__ import annotations

import argparse
import socket

from fireside.engine.apikey import KEYRING_SERVICE, KEYRING_USER, load_api_key
from fireside.engine.cli import main
from fireside.engine.cli.server import api_key


def test_network_bind_without_key_is_refused(capsys):
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 1
    assert "without an API key" in capsys.readouterr().err


def test_taken_port_is_a_clear_message(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    assert f"port {port} on 127.0.0.1 is already in use" in capsys.readouterr().err


def test_keys_are_stored_in_the_keyring_and_forgotten(memory_keyring, capsys):
    args = argparse.Namespace(api_key="given-key", new_key=False)
    assert api_key(args) == "given-key"
    assert memory_keyring.store[(KEYRING_SERVICE, KEYRING_USER)] == "given-key"
    made = api_key(argparse.Namespace(api_key=None, new_key=True))
    assert made != "given-key" and len(made) >= 32 and load_api_key() == made
    assert made in capsys.readouterr().out  # shown once, when it is made
    assert api_key(argparse.Namespace(api_key=None, new_key=False)) == made  # later runs use the stored one
    assert main(["serve", "--forget-key"]) == 0
    assert load_api_key() is None
