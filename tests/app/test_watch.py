"""What another process changes in the shared configuration shows in a running window without a click:
a remote added the way ``fireside remote add`` adds it, and a model imported the way ``fireside import``
imports it."""

from __future__ import annotations

import threading

import pytest

from fireside.engine.library import Library
from fireside.engine.remote import RemoteRegistry
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.gguf_builder import build_gguf


@pytest.fixture
def own_runtime():
    settings = Settings.from_env()
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0)
    yield runtime
    runtime.close()


def _elsewhere(fn) -> None:
    """Run ``fn`` on another thread with its own engine objects, as a CLI process would."""
    worker = threading.Thread(target=fn)
    worker.start()
    worker.join()


def test_remote_added_elsewhere_reaches_the_picker_and_settings(qtbot, make_app, own_runtime, remote_server):
    app = make_app(own_runtime, own_runtime.settings)
    bar, remotes = app.window.chat.model_bar, app.window.pages["Settings"].remotes
    qtbot.waitUntil(lambda: bar.combo.count() > 0, timeout=20_000)
    assert bar.combo.findText("remote/lab/starter") < 0
    _elsewhere(lambda: RemoteRegistry(Settings.from_env()).add("lab", f"{remote_server.url}/v1"))
    qtbot.waitUntil(lambda: bar.combo.findText("remote/lab/starter") >= 0, timeout=20_000)
    qtbot.waitUntil(lambda: any("lab" in remotes.remotes.item(i).text() for i in range(remotes.remotes.count())),
                    timeout=20_000)


def test_model_imported_elsewhere_reaches_my_models_and_the_picker(qtbot, make_app, own_runtime, tmp_path):
    app = make_app(own_runtime, own_runtime.settings)
    models, bar = app.window.pages["My Models"], app.window.chat.model_bar
    qtbot.waitUntil(lambda: models.table_model.rowCount() > 0, timeout=20_000)
    src = build_gguf(tmp_path / "other-app" / "Fresh-Q8_0.gguf", seed=7)
    added = []
    _elsewhere(lambda: added.append(Library(Settings.from_env()).add_file(src, app="file")))
    model_id = added[0].id
    qtbot.waitUntil(lambda: any(m.id == model_id for m in models.table_model.rows), timeout=20_000)
    qtbot.waitUntil(lambda: bar.combo.findText(model_id) >= 0, timeout=20_000)
