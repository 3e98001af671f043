"""Fixtures for the app tests: one real runtime (SmolLM2) shared by the session, and a started app per
test whose chats, preferences and models folders live in the test's own Fireside home."""

from __future__ import annotations

import pytest

from fireside.engine.settings import Settings
from tests.helpers.driving import SMALL

QT_FIXTURES = {"qtbot", "qtmodeltester", "qapp"}


@pytest.fixture(scope="session")
def shared_runtime(tmp_path_factory, smollm2_path):
    """A real runtime; loading SmolLM2 once keeps the suite fast on two cores."""
    from fireside.engine.runtime.runtime import Runtime

    home = tmp_path_factory.mktemp("runtime-home")
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0)
    yield runtime
    runtime.close()


@pytest.fixture
def remote_server(shared_runtime):
    """A second real Fireside server over the shared runtime, to add as a remote engine."""
    from fireside.engine.server import ServerThread, create_app

    thread = ServerThread(create_app(shared_runtime, shared_runtime.settings), "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture
def loaded_runtime(shared_runtime):
    shared_runtime.load("starter", SMALL)
    return shared_runtime


@pytest.fixture
def make_app(qtbot):
    """Start the app the way ``main`` does (no tray); every app started is stopped at the end."""
    from fireside.app.main import Fireside

    started = []

    def start(runtime, settings: Settings | None = None):
        app = Fireside(settings=settings, engine=runtime, tray=False)
        window = app.start()
        window.show()
        qtbot.waitExposed(window)
        started.append(app)
        return app

    yield start
    for app in reversed(started):
        app.stop()


@pytest.fixture
def app(make_app, loaded_runtime):
    return make_app(loaded_runtime)


@pytest.hookimpl(tryfirst=True)  # before -m selects by marker
def pytest_collection_modifyitems(items):
    # A test that uses qtbot, qtmodeltester or qapp (itself or through a fixture) needs a QApplication
    # and usually real widgets: it is a ``gui`` test, marked here rather than by hand. The offscreen
    # platform warns that it cannot propagate size hints whenever a window is shown; that is the test
    # platform talking, not the app.
    for item in items:
        if QT_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.gui)
        if "tests/app/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.qt_log_ignore("propagateSizeHints"))
