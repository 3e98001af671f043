"""``fireside cache ls|clear`` as a user runs them, over a cache folder holding two chats' states."""

from __future__ import annotations

import os

from fireside.engine.runner import kvcache, kvstate
from fireside.engine.settings import Settings
from tests.helpers.cli import fireside
from tests.helpers.waiting import wait_until


def _fill(folder) -> None:
    cache = kvstate.PromptCache(kvcache.CacheConfig(str(folder), 1 << 30, min_tokens=1), "id-1", "model-a.gguf")
    try:
        for n, (tag, first) in enumerate((("chat-1", 1), ("chat-2", 2)), 1):
            assert cache.save([first] * 1234, bytearray(300_000), tag)
            wait_until(lambda n=n: len(kvcache.entries(folder)) == n, 30)
    finally:
        cache.close()


def test_ls_shows_each_state_and_clear_by_tag_keeps_the_others(fireside_home):
    folder = Settings.from_env().prompt_cache_dir
    _fill(folder)
    env = {**os.environ, "FIRESIDE_HOME": str(fireside_home)}
    shown = fireside("cache", "ls", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "prompt cache on" in shown.stdout and "2 saved states" in shown.stdout
    assert shown.stdout.count("model-a.gguf") == 2 and "1,234" in shown.stdout and "chat-2" in shown.stdout

    cleared = fireside("cache", "clear", "--tag", "chat-1", env=env)
    assert cleared.returncode == 0 and "deleted 1 saved state for tag chat-1" in cleared.stdout
    assert [e.tag for e in kvcache.entries(folder)] == ["chat-2"]

    off = fireside("cache", "ls", env={**env, "FIRESIDE_PROMPT_CACHE": "off"})
    assert "prompt cache off" in off.stdout and "1 saved state" in off.stdout
    assert "deleted 1 saved state" in fireside("cache", "clear", env=env).stdout
    assert kvcache.entries(folder) == [] and not list(folder.glob("kv-*.bin"))
