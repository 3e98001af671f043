"""The prompt cache from the app's side: the tag each chat's saved KV states carry, forgetting them
when a chat is deleted, the folder's size and Clear for the Settings page, and that page's choices
applied to ``Settings`` (at start-up, and on every change).

The engine (``engine/runner/kvcache.py``) keys a saved state by its tokens and model; the chat
session tags each turn it sends with ``tag_for(conversation id)``, so deleting a chat deletes exactly
its states (an undone delete only means its next turn evaluates its history again).
"""

from __future__ import annotations

from typing import Any

from fireside.engine.runner import kvcache
from fireside.engine.settings import Settings


def tag_for(conv_id: int) -> str:
    """The tag a chat's saved states carry in the prompt cache."""
    return f"chat-{conv_id}"


def apply_prefs(settings: Settings, prefs: Any) -> None:
    """Copy the Settings page's prompt cache choices (kept in ``prefs``) into ``settings``."""
    chosen = prefs.get("prompt_cache") or {}
    settings.prompt_cache = settings.prompt_cache and bool(chosen.get("enabled", True))
    if chosen.get("cap_gib"):
        settings.prompt_cache_cap_bytes = int(float(chosen["cap_gib"]) * 2**30)


class PromptCacheController:
    """The prompt cache folder and its choices, for the Settings page and the Chat page; every read,
    delete and re-apply runs on the task pool. Owned by the bridge (``bridge.prompt_cache``)."""

    def __init__(self, engine, settings: Settings | None, tasks: Any):
        self.engine, self.settings, self.tasks = engine, settings, tasks

    def forget_chat(self, conv_id: int) -> None:
        """Delete a chat's saved states."""
        folder = self.settings.prompt_cache_dir
        self.tasks.run_in_background(lambda: kvcache.clear(folder, tag=tag_for(conv_id)))

    def usage(self, on_done) -> None:
        """``(bytes, saved states)`` in the folder."""
        folder = self.settings.prompt_cache_dir
        self.tasks.run_in_background(lambda: (kvcache.total_size(folder), len(kvcache.entries(folder))), on_done)

    def clear(self, on_done) -> None:
        """Delete every saved state."""
        folder = self.settings.prompt_cache_dir
        self.tasks.run_in_background(lambda: kvcache.clear(folder), on_done)

    def choose(self, enabled: bool | None = None, cap_bytes: int | None = None) -> None:
        """The Settings page's choice (None: unchanged), in ``Settings`` at once and in the loaded models
        soon after."""
        if enabled is not None:
            self.settings.prompt_cache = enabled
        if cap_bytes is not None:
            self.settings.prompt_cache_cap_bytes = cap_bytes
        apply = getattr(self.engine, "apply_prompt_cache", None)
        if apply is not None:
            self.tasks.run_in_background(apply)
