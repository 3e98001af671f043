"""``fireside serve``: refuses the network without a key, reports a taken port, keeps the key in the keyring."""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys

import httpx
import pytest

from fireside.engine.apikey import KEYRING_SERVICE, KEYRING_USER, load_api_key
from fireside.engine.cli import main
from fireside.engine.cli.server import api_key
from tests.helpers.waiting import free_port


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


@pytest.mark.model
def test_serve_loads_models_with_the_load_options_given(fireside_home):
    """``fireside serve --ctx 1024 --parallel 2 --draft starter`` loads with those options, as ``run`` and
    ``chat`` do; ``/api/ps`` (and so ``fireside ps``) names the draft model."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "-v", "serve", "--port", str(port),
                             "--ctx", "1024", "--parallel", "2", "--threads", "1", "--draft", "starter",
                             "--load", "starter"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while not lines or "Fireside API on" not in lines[-1]:  # the banner comes once the model is in
            lines.append(proc.stdout.readline())
            assert lines[-1], "".join(lines)  # the server ended before its banner
        assert any("loaded starter" in ln and "context 1024, 2 slots" in ln for ln in lines), "".join(lines)
        models = httpx.get(f"http://127.0.0.1:{port}/api/ps", timeout=30).json()["models"]
        assert [(m["model"], m["context_length"], m["draft"]) for m in models] == [("starter", 1024, "starter")]
    finally:
        proc.terminate()
        proc.wait(30)
