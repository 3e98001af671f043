"""What the model is sent of a chat: its thread as chat messages, and its stored sampling.

A failed reply is left out; a tool call and its result go as OpenAI's ``tool_calls`` and ``tool``
messages; a message's images and documents go as parts that the bridge reads on the reply's worker
(``bridge/attachments.py``, ``bridge/chatdocs.py``), so a later turn still sees them.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from fireside.engine.types import Sampling

from ..bridge.attachments import saved_part
from ..bridge.chatdocs import document_part
from ..store import Message, Store

NOT_RUN = "The call was not run (Fireside stopped before it answered)."


def as_chat_message(m: Message) -> dict[str, Any] | None:
    """A stored message as the model reads it, or None for one it should not see (a failed reply)."""
    if m.state == "error":
        return None
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool.get("call_id", ""), "name": m.tool.get("function", ""),
                "content": m.content or NOT_RUN}
    if m.tool.get("calls"):
        return {"role": "assistant", "content": m.content, "tool_calls": m.tool["calls"]}
    if m.images or m.documents:  # parts the bridge reads on the reply's worker (attachments.py, chatdocs.py)
        text = [{"type": "text", "text": m.content}] if m.content else []
        return {"role": m.role, "content": text + [saved_part(name) for name in m.images]
                + [document_part(d) for d in m.documents]}
    return {"role": m.role, "content": m.content} if m.content else None


def to_sampling(values: dict) -> Sampling:
    """A chat's stored sampling dict as ``Sampling`` (keys it does not know are left out)."""
    known = {f.name for f in fields(Sampling)}
    return Sampling(**{k: v for k, v in values.items() if k in known})


def request_messages(store: Store, conv_id: int) -> list[dict[str, Any]]:
    """Chat ``conv_id``'s thread as chat messages for the model, the chat's system prompt first; the
    model's tool calls and their results go as ``tool_calls`` and ``tool`` messages."""
    conv = store.conversation(conv_id)
    messages = [m for m in map(as_chat_message, store.thread(conv.id)) if m is not None]
    if conv.system_prompt.strip():
        messages.insert(0, {"role": "system", "content": conv.system_prompt})
    return messages
