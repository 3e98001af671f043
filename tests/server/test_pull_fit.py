"""``/api/pull`` through the real hub puller against the fake hub: a model that cannot fit on this
machine is refused in the status stream (507 ``model_too_large``) before any byte is downloaded; one
that fits is pulled. The API has no override: ``fireside pull --force`` is the way to pull it anyway."""

from __future__ import annotations

import ollama
import pytest

from fireside.engine.library import Library
from fireside.engine.models import hardware
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from tests.engine.hub.test_downloads import tiny_machine
from tests.helpers.hubfixtures import Q4, REPO, hub_settings, run_fakehub

fakehub = pytest.fixture(run_fakehub)
settings = pytest.fixture(hub_settings)


@pytest.fixture
def hub_server(runtime, settings):
    policy = SecurityPolicy(allow_management=True)  # pulls are model management: off unless allowed
    thread = ServerThread(create_app(runtime, settings, Library(settings), policy=policy), "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


def test_api_pull_refuses_a_model_that_cannot_fit(hub_server, settings, fakehub, monkeypatch):
    monkeypatch.setattr(hardware, "detect", lambda refresh=False: tiny_machine())
    client = ollama.Client(host=hub_server.url)
    with pytest.raises(ollama.ResponseError, match="will not fit on this machine.*--force"):
        for _ in client.pull(f"{REPO}:Q4_1", stream=True):
            pass
    with pytest.raises(ollama.ResponseError) as refused:
        client.pull(f"{REPO}:Q4_1", stream=False)
    assert refused.value.status_code == 507
    assert fakehub.downloads(Q4) == [] and not list(settings.models_dir.rglob("*.gguf*"))


def test_api_pull_of_a_model_that_fits_goes_ahead(hub_server, settings, fakehub):
    client = ollama.Client(host=hub_server.url)
    statuses = [p.status for p in client.pull(f"{REPO}:Q4_1", stream=True)]
    assert statuses[-1] == "success"
    assert (settings.models_dir / REPO / Q4).is_file()
