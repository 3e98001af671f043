"""Export a conversation as Markdown (the thread shown) or JSON (every message, branches included).

Both are pure functions of the store's contents, so they can run anywhere and be tested without Qt.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from fireside.engine.fsutil import atomic_write

from .store import Store


def to_markdown(store: Store, conv_id: int) -> str:
    conv = store.conversation(conv_id)
    lines = [f"# {conv.title}", ""]
    if conv.model_id:
        lines += [f"*Model: {conv.model_id}*", ""]
    if conv.system_prompt:
        lines += ["**System**", "", conv.system_prompt, ""]
    for msg in store.thread(conv_id):
        who = "You" if msg.role == "user" else (msg.model_id or "Assistant")
        lines += [f"**{who}**", "", msg.content.rstrip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def to_json(store: Store, conv_id: int) -> str:
    conv = store.conversation(conv_id)
    data = {
        "format": "fireside-chat", "version": 1,
        "conversation": asdict(conv),
        "thread": [m.id for m in store.thread(conv_id)],
        "messages": [asdict(m) for m in store.all_messages(conv_id)],
    }
    return json.dumps(data, indent=2, ensure_ascii=False)


def save(path: Path | str, text: str) -> Path:
    """Write an export durably and whole: a crash mid-write leaves any earlier file at ``path`` intact."""
    return atomic_write(path, text)
