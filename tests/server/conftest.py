"""Real servers on loopback over the real SmolLM2 model, shared so the suite stays fast.

One runtime and one open server (no key, model management off) serve the whole session; a keyed
server with management on shares that runtime. A second runtime with a queue of one backs the queue-full, disconnect and crash tests, so
their runner can be filled or killed without disturbing the others. Settings are built from a
``tmp_path_factory`` folder: the function-scoped ``FIRESIDE_HOME`` of tests/conftest.py does not
reach session fixtures.
"""

from __future__ import annotations

import pytest

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.driving import API_KEY
from tests.helpers.fakes import FakePuller


@pytest.fixture(scope="session")
def server_settings(tmp_path_factory) -> Settings:
    home = tmp_path_factory.mktemp("server-home")
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    return settings


@pytest.fixture(scope="session")
def library(server_settings) -> Library:
    return Library(server_settings)


@pytest.fixture(scope="session")
def runtime(server_settings, library, smollm2_path):
    rt = Runtime(server_settings, resolver=lambda ref: library.get(ref).path, max_queue=32)
    yield rt
    rt.close()


@pytest.fixture(scope="session")
def server(runtime, server_settings, library):
    """The open server (loopback, no key) the dialect tests talk to."""
    thread = ServerThread(create_app(runtime, server_settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture(scope="session")
def base_url(server) -> str:
    return server.url


@pytest.fixture(scope="session")
def keyed_server(runtime, server_settings, library):
    """The same runtime behind an API key, with a fake puller for the management routes."""
    policy = SecurityPolicy(api_key=API_KEY, allowed_origins=["http://allowed.example"], allow_management=True)
    app = create_app(runtime, server_settings, library, policy=policy,
                     puller=FakePuller(server_settings, library))
    thread = ServerThread(app, "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def narrow(server_settings, library):
    """A runtime with a queue of one, and a server over it that allows model management: (server, runtime)."""
    rt = Runtime(server_settings, resolver=lambda ref: library.get(ref).path, max_queue=1)
    policy = SecurityPolicy(allow_management=True)
    thread = ServerThread(create_app(rt, server_settings, library, policy=policy), "127.0.0.1", 0)
    thread.start()
    yield thread, rt
    thread.stop()
    rt.close()
