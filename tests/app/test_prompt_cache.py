"""The prompt cache in the app, on the real SmolLM2: a chat reopened after the app restarts (a new
runtime, a new runner) resumes from the KV state saved on disk, and its reply's stats line says so;
the Settings page shows the cache's size and clears it; deleting a chat deletes its saved states."""

from __future__ import annotations

import pytest

from fireside.engine.runner import kvcache, kvstate
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.app.conftest import SMALL
from tests.helpers.driving import send

pytestmark = pytest.mark.model

QUESTION = ("I am planning a walk along the old canal towpath from the lock keeper's cottage to the "
            "aqueduct, about eleven kilometres, with two children and a dog, in late October. What should "
            "we bring, and where along the way could we stop for a rest and something warm to drink?")


def started(make_app, settings: Settings):
    runtime = Runtime(settings, idle_ttl_s=0)
    runtime.load("starter", SMALL)
    return make_app(runtime, settings), runtime


def test_a_chat_reopened_after_a_restart_resumes_from_cache(qtbot, make_app):
    settings = Settings.from_env()
    first, runtime = started(make_app, settings)
    try:
        reply_id, state = send(qtbot, first.window.chat, QUESTION, max_tokens=12)
        conv_id = first.window.chat.conv_id
        assert state == "complete"
        assert "from cache" not in first.window.chat.transcript.view(reply_id).stats.text()
    finally:
        first.stop()
        runtime.close()  # the app is gone: its runner too; the state it saved stays on disk
    assert [e.tag for e in kvcache.entries(settings.prompt_cache_dir)] == [f"chat-{conv_id}"]

    second, runtime = started(make_app, settings)
    try:
        page = second.window.chat
        assert page.conv_id == conv_id  # the app reopens the last chat
        again_id, state = send(qtbot, page, "And if it rains?", max_tokens=8)
        stats = second.ctx.store.message(again_id).stats
        assert state == "complete" and stats["restored_tokens"] > 60
        shown = page.transcript.view(again_id).stats.text()
        assert f"resumed {stats['restored_tokens']:,} tokens from cache" in shown

        box = second.window.pages["Settings"].prompt_cache
        box.refresh()
        qtbot.waitUntil(lambda: "1 saved state" in box.size.text(), timeout=10_000)
        page.delete_conversation(conv_id)
        qtbot.waitUntil(lambda: kvcache.entries(settings.prompt_cache_dir) == []  # a write under way is dropped
                        and not list(settings.prompt_cache_dir.glob("kv-*.bin")), timeout=10_000)
        box.refresh()
        qtbot.waitUntil(lambda: "0 saved states" in box.size.text(), timeout=10_000)
    finally:
        second.stop()
        runtime.close()


def test_the_settings_group_saves_its_choices_and_clears_the_folder(qtbot, make_app, shared_runtime):
    settings = Settings.from_env()
    app = make_app(shared_runtime, settings)
    box = app.window.pages["Settings"].prompt_cache
    folder = settings.prompt_cache_dir
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(folder), 1 << 30, min_tokens=1), "some-model")
    cache.save([1, 2, 3], bytearray(200_000))
    cache.close()
    box.refresh()
    qtbot.waitUntil(lambda: "1 saved state" in box.size.text(), timeout=10_000)
    assert box.size.text().startswith(("2", "1")) and "KB" in box.size.text()  # about 200 KB

    box.enabled.setChecked(False)
    box.cap.setValue(2.5)
    assert settings.prompt_cache is False and settings.prompt_cache_cap_bytes == int(2.5 * 2**30)
    assert app.ctx.prefs.get("prompt_cache") == {"enabled": False, "cap_gib": 2.5}

    box.clear.click()
    qtbot.waitUntil(lambda: "0 saved states" in box.size.text(), timeout=10_000)
    assert kvcache.entries(folder) == [] and not list(folder.glob("kv-*.bin"))


def test_settings_shows_the_states_saved_since_it_was_built(qtbot, make_app):
    """Issue 45: after several replies Settings still read "0 B in 0 saved states" (read once, at start)."""
    settings = Settings.from_env()
    app, runtime = started(make_app, settings)
    try:
        box = app.window.pages["Settings"].prompt_cache
        qtbot.waitUntil(lambda: "0 saved states" in box.size.text(), timeout=10_000)
        _, state = send(qtbot, app.window.chat, QUESTION, max_tokens=8)
        assert state == "complete"
        qtbot.waitUntil(lambda: len(kvcache.entries(settings.prompt_cache_dir)) == 1, timeout=15_000)
        app.window.show_page("Settings")
        qtbot.waitUntil(lambda: "1 saved state" in box.size.text(), timeout=10_000)
    finally:
        app.stop()
        runtime.close()
