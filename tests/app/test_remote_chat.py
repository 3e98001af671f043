"""A model on a remote engine (here a second Fireside server on loopback) is picked and chatted with
in the window like a local one."""

from __future__ import annotations

import pytest

from fireside.engine.remote import RemoteRegistry
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.driving import send

pytestmark = pytest.mark.model
MODEL = "remote/lab/starter"


@pytest.fixture
def remote_server(shared_runtime):
    settings = shared_runtime.settings
    thread = ServerThread(create_app(shared_runtime, settings), "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


def test_remote_model_is_listed_picked_and_answers(qtbot, make_app, remote_server):
    settings = Settings.from_env()
    settings.ensure_dirs()
    RemoteRegistry(settings).add("lab", f"{remote_server.url}/v1")
    runtime = Runtime(settings, idle_ttl_s=0)  # no local model is loaded by this test
    try:
        app = make_app(runtime, settings)
        page = app.window.chat
        qtbot.waitUntil(lambda: page.model_bar.combo.findText(MODEL) >= 0, timeout=20_000)
        page.model_bar.set_model(MODEL)
        assert "Remote model" in page.model_bar.state.text()
        reply_id, state = send(qtbot, page, "Say hello.", max_tokens=6)
        assert state == "complete"
        reply = app.ctx.store.message(reply_id)
        assert reply.content.strip() and reply.stats["completion_tokens"] > 0
        assert runtime.loaded() == []  # nothing ran locally
    finally:
        runtime.close()
