"""The prompt cache from the app's side: the tag each chat's saved KV states carry, forgetting them
when a chat is deleted, and the Settings page's choices applied to ``Settings`` at start-up.

The engine (``engine/runtime/kvcache.py``) keys a saved state by its tokens and model; the chat
session tags each turn it sends with ``tag_for(conversation id)``, so deleting a chat deletes exactly
its states (an undone delete only means its next turn evaluates its history again).
"""

from __future__ import annotations

from typing import Any

from fireside.engine.runtime import kvcache
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


def forget_chat(settings: Settings, tasks: Any, conv_id: int) -> None:
    """Delete a chat's saved states, on ``tasks``' pool (off the GUI thread)."""
    folder = settings.prompt_cache_dir
    tasks.run_in_background(lambda: kvcache.clear(folder, tag=tag_for(conv_id)))
