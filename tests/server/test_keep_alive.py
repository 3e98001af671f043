"""Idle unload for the headless server: ``fireside serve --keep-alive``, and ``/api/ps`` ``expires_at``
honouring a request's ``keep_alive`` (issue 18, item 5)."""

from __future__ import annotations

import argparse
import datetime as dt
import threading
import time

import httpx
import pytest

from fireside.engine.cli import main
from fireside.engine.cli import server as cli_server
from fireside.engine.settings import Settings
from tests.helpers.waiting import free_port, wait_until


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600), ("90", 90), ("1.5h", 5400), ("30s", 30),
                                               ("-1", 0.0), ("0", 0.001)])
def test_keep_alive_option_parses_durations(text, seconds):
    assert cli_server.keep_alive(text) == seconds


def test_a_bad_keep_alive_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--keep-alive", "soon"])
    assert exit_.value.code == 2 and "keep_alive 'soon'" in capsys.readouterr().err
    with pytest.raises(argparse.ArgumentTypeError):
        cli_server.keep_alive("5 minutes")


def expires_in(base_url: str, model: str = "starter") -> float:
    """Seconds from now until /api/ps says ``model`` unloads (None if it is not loaded)."""
    for entry in httpx.get(f"{base_url}/api/ps", timeout=30).json()["models"]:
        if entry["model"] == model:
            at = dt.datetime.fromisoformat(entry["expires_at"].replace("Z", "+00:00"))
            return at.timestamp() - time.time()
    return None


def answers(base_url: str) -> bool:
    try:
        httpx.get(f"{base_url}/api/version", timeout=1)
    except httpx.TransportError:
        return False
    return True


def load(base_url: str, **keep) -> dict:
    r = httpx.post(f"{base_url}/api/generate", json={"model": "starter", **keep}, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.model
def test_ps_expires_at_follows_the_requests_keep_alive(base_url, runtime):
    load(base_url, keep_alive="1h")
    assert 3590 < expires_in(base_url) <= 3600
    # a load request is a use: the clock starts again from it, not from the last reply (4 s ago by then)
    wait_until(lambda: expires_in(base_url) <= 3596, 10)
    load(base_url, keep_alive=120)
    assert 117 < expires_in(base_url) <= 120
    load(base_url, keep_alive=-1)
    assert expires_in(base_url) > 100 * 365 * 86400  # kept for ever: far in the future, as Ollama shows
    load(base_url)  # no keep_alive: back to the server's default
    assert runtime.idle_ttl_s - 60 < expires_in(base_url) <= runtime.idle_ttl_s
    assert load(base_url, keep_alive=0)["done_reason"] == "unload"
    assert expires_in(base_url) is None


@pytest.mark.model
def test_serve_keep_alive_and_management_reach_the_server(fireside_home):
    settings, port, stop = Settings.from_env(), free_port(), threading.Event()
    worker = threading.Thread(target=cli_server.serve, args=(settings, "127.0.0.1", port, None, [], [], stop),
                              kwargs={"keep_alive_s": cli_server.keep_alive("42m"), "management": True},
                              daemon=True)
    worker.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(url), 30)
        load(url)
        assert 42 * 60 - 60 < expires_in(url) <= 42 * 60
        refused = httpx.request("DELETE", f"{url}/api/delete", json={"model": "starter"}, timeout=30)
        assert refused.status_code == 400 and "cannot be removed" in refused.text  # reached the library
    finally:
        stop.set()
        worker.join(30)
