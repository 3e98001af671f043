"""The main machine's tunnel on its own (loopback, no namespaces): llama.cpp's RPC client, in a process of
its own as in a runner, reaches a lender through ``Tunnel`` even when the lender answers late, and is let
go, in words, when it never does."""

from __future__ import annotations

import logging
import subprocess
import sys
import time

import pytest

from fireside.engine.devices import DeviceBook
from fireside.engine.devices.book import CLIENT, PairedDevice
from fireside.engine.rpc import tunnel
from fireside.engine.settings import Settings
from tests.helpers.waiting import free_port

TOKEN = "t" * 43


def _client(endpoint: str, built: str | None) -> subprocess.Popen:
    """llama.cpp's RPC client (HELLO, then the device count) in a process of its own: it aborts the process
    when its connection fails, as it would a runner's."""
    code = f"from fireside.engine.ggml import rpc_devices; print(rpc_devices([{endpoint!r}], {built!r}))"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def lender_port(lender, rpc_built):
    """A sharing device that lends memory, made but not yet listening: ``(start, port, cert_pem, module)``."""
    port = free_port()
    shared = lender(port)
    DeviceBook(Settings.from_env()).add(PairedDevice("beta", CLIENT, "ab" * 32), TOKEN)
    return shared.start, port, shared.identity.cert_pem, rpc_built


def test_a_runner_that_connects_before_its_lender_listens_is_answered_once_it_does(lender_port):
    start, port, cert_pem, built = lender_port
    carried = tunnel.Tunnel(f"127.0.0.1:{port}", cert_pem, TOKEN, "desk")
    try:
        client = _client(carried.endpoint, built)
        time.sleep(1.5)  # its tunnel's first tries find nothing listening
        assert client.poll() is None, client.communicate()
        start()
        out, err = client.communicate(timeout=60)
    finally:
        carried.close()
    assert client.returncode == 0 and "RPC" in out, err[-2000:]


def test_a_runner_whose_lender_never_answers_is_let_go_in_words(lender_port, monkeypatch, caplog):
    _, port, cert_pem, built = lender_port  # never started
    monkeypatch.setattr(tunnel, "OPEN_WITHIN_S", 1.5)
    carried = tunnel.Tunnel(f"127.0.0.1:{port}", cert_pem, TOKEN, "desk")
    try:
        with caplog.at_level(logging.WARNING, logger=tunnel.__name__):
            client = _client(carried.endpoint, built)
            client.communicate(timeout=30)
    finally:
        carried.close()
    assert client.returncode != 0  # llama.cpp's client gives up when its connection closes: no hang
    assert any("the RPC tunnel to desk could not open" in r.getMessage() for r in caplog.records), caplog.text
