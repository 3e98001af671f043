"""``ServerThread``: a taken port is a clear error at once, never a hang; stop is clean and frees the port."""

from __future__ import annotations

import socket
import time

import httpx
import pytest

from fireside.engine.errors import ServerError
from fireside.engine.server import ServerThread, create_app


@pytest.fixture()
def app(runtime, server_settings, library):
    return create_app(runtime, server_settings, library)


def test_taken_port_gives_a_clear_error_without_hanging(app):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        thread = ServerThread(app, "127.0.0.1", port)
        with pytest.raises(ServerError, match=f"port {port} .* already in use"):
            thread.start(timeout=30)
        assert time.monotonic() - started < 5


def test_start_serves_and_stop_frees_the_port(app):
    thread = ServerThread(app, "127.0.0.1", 0)
    thread.start()
    assert thread.running and thread.port > 0
    assert httpx.get(f"{thread.url}/api/version").json()["version"]
    thread.stop()
    assert not thread.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{thread.url}/api/version", timeout=2)
    again = ServerThread(app, "127.0.0.1", thread.port)  # the port is free again
    again.start()
    again.stop()


def test_a_thread_that_dies_while_starting_is_reported(app, monkeypatch):
    thread = ServerThread(app, "127.0.0.1", 0)

    def boom(*args, **kwargs):
        raise SystemExit(1)  # what uvicorn does on some start-up failures

    monkeypatch.setattr(thread.server, "run", boom)
    with pytest.raises(ServerError, match="stopped while starting"):
        thread.start(timeout=30)


def test_a_thread_starts_once(app):
    thread = ServerThread(app, "127.0.0.1", 0)
    thread.start()
    try:
        with pytest.raises(ServerError):
            thread.start()
    finally:
        thread.stop()
