"""What the user sees when llama.cpp crashes a load: one sentence in the notice bar saying what changed,
a reply all the same, and the workaround listed on the Settings page with a way to forget it."""

from __future__ import annotations

import pytest

from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.driving import send

pytestmark = pytest.mark.model


def test_healed_load_is_told_answered_and_listed_in_settings(qtbot, make_app, monkeypatch):
    monkeypatch.setenv("FIRESIDE_TEST_RUNNER_CRASH", "extra_bufts")
    settings = Settings.from_env()
    runtime = Runtime(settings, idle_ttl_s=0)
    try:
        app = make_app(runtime, settings)
        app.ctx.prefs.put("load_options", "starter", {"context": 1024})
        window, page = app.window, app.window.chat
        _reply, state = send(qtbot, page, "Say hello", max_tokens=8, timeout=120_000)
        assert state == "complete"
        assert "llama.cpp crashed (SIGSEGV) while loading starter" in window.notice.text.text()
        assert "AMX/repack matrix kernels (extra buffer types) off" in window.notice.text.text()

        settings_page = window.pages["Settings"]
        settings_page.refresh_hardware()
        qtbot.waitUntil(lambda: "Workaround:" in settings_page.workarounds.text(), timeout=10_000)
        assert "starter loads with the AMX/repack" in settings_page.workarounds.text()
        assert settings_page.clear_workarounds.isVisibleTo(settings_page)
        settings_page.clear_workarounds.click()
        qtbot.waitUntil(lambda: not settings_page.workarounds.text(), timeout=10_000)
        assert runtime.workarounds.entries() == []
    finally:
        runtime.close()
