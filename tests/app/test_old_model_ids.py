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
