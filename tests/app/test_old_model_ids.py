"""A chat saved with a model id an older Fireside gave (before GPT4All's and Jan's ids lost their
repeated parts) still opens with that model, and the picker loads it."""

from __future__ import annotations

import os

import pytest

from fireside.engine.library import Library
from fireside.engine.settings import Settings

pytestmark = pytest.mark.model

OLD = "gpt4all/SmolLM2-135M-Instruct-Q4_1/SmolLM2-135M-Instruct-Q4_1"


@pytest.fixture
def old_import(fireside_home, tmp_path, smollm2_path):
    """SmolLM2 imported from GPT4All's folder as an older Fireside did, with a runtime on that home."""
    from fireside.engine.runtime.runtime import Runtime

    settings = Settings.from_env()
    settings.ensure_dirs()
    src = tmp_path / "gpt4all/SmolLM2-135M-Instruct-Q4_1.gguf"
    src.parent.mkdir()
    os.symlink(smollm2_path, src)
    Library(settings).add_file(src, publisher="gpt4all", repo="SmolLM2-135M-Instruct-Q4_1", app="gpt4all")
    runtime = Runtime(settings, idle_ttl_s=0)
    yield settings, runtime
    runtime.close()


def test_a_chat_saved_with_an_old_id_loads_its_model(qtbot, old_import, make_app):
    settings, runtime = old_import
    app = make_app(runtime, settings)
    conv = app.ctx.store.create_conversation("An old chat", OLD)
    page = app.window.chat
    page.open_conversation(conv.id)
    assert page.model_bar.current() == OLD
    with qtbot.waitSignal(page.model_bar.model_ready, timeout=120_000):
        page.model_bar.loader.load(OLD)
    assert runtime.is_loaded(OLD)


def test_settings_kept_under_an_old_id_move_to_the_new_one(qtbot, old_import, make_app):
    """The load settings, system prompt and last use a person gave the model under its old id are
    there under its new id once the app has started: the load dialog and My Models look them up by id."""
    import json

    settings, runtime = old_import
    new = Library(settings).get(OLD).id
    assert new != OLD
    (settings.config_dir / "app.json").write_text(json.dumps({
        "last_model": OLD, "load_options": {OLD: {"n_ctx": 1024}},
        "model_defaults": {OLD: {"system_prompt": "Be brief."}}, "last_used": {OLD: 1.0e9}}))
    app = make_app(runtime, settings)
    prefs = app.ctx.prefs
    qtbot.waitUntil(lambda: OLD not in prefs.get("load_options"), timeout=10_000)
    assert prefs.get("load_options") == {new: {"n_ctx": 1024}}
    assert prefs.get("model_defaults") == {new: {"system_prompt": "Be brief."}}
    assert prefs.get("last_used") == {new: 1.0e9}
    assert prefs.get("last_model") == new
    prefs.flush()
    saved = json.loads((settings.config_dir / "app.json").read_text())
    assert saved["load_options"] == {new: {"n_ctx": 1024}}
