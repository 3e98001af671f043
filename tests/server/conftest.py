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

API_KEY = "test-key-0123456789"


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


class FakePuller:
    """Stands in for the hub: reports progress in three steps, then adds a tiny model to the library."""

    def __init__(self, settings: Settings, library: Library):
        self.settings, self.library, self.calls = settings, library, []

    def __call__(self, name, on_progress=None, cancel=None):
        from fireside.engine.hub.downloads import Progress
        from tests.helpers.gguf_builder import build_gguf

        self.calls.append(name)
        for done in (0, 512, 1024):
            on_progress(Progress("tiny.gguf", done, 1024, 1e6, 0.0, "downloading"))
        path = build_gguf(self.settings.models_dir / "fake" / "pulled" / "tiny-Q8_0.gguf", name="Tiny")
        return self.library.by_path(path)


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
