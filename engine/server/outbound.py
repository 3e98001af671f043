"""The reply side every dialect shares: what the encoders need to write the engine's chunks.

A finished reply's parts, a streamed reply's tool calls as the updates a client is still owed
(``CallTracker``), log-probabilities in the shape OpenAI and Ollama share, tool-call arguments as
objects (Anthropic, Ollama), and SSE framing. The request side is ``inbound.py``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..types import Chunk, TokenLogprob, ToolCall


def reply_parts(chunks: list[Chunk]) -> tuple[str, str, list, Chunk]:
    """Text, reasoning, tool calls and the ``done`` chunk of a finished reply."""
    text = "".join(c.text for c in chunks if c.kind == "text")
    reasoning = "".join(c.text for c in chunks if c.kind == "reasoning")
    calls = [call for c in chunks if c.kind == "tool_calls" for call in c.tool_calls or []]
    done = next((c for c in reversed(chunks) if c.kind == "done"), Chunk("done", finish_reason="stop"))
    return text, reasoning, calls, done


def text_logprobs(chunks: list[Chunk]) -> list[TokenLogprob]:
    """The log-probabilities of a finished reply's text, token by token."""
    return [e for c in chunks if c.kind == "text" for e in c.logprobs or []]


class CallTracker:
    """What a streamed reply's tool calls still owe the client, as ``(index, head, fragment)`` updates:
    ``head`` is the call (id and name) the first time its index appears, ``fragment`` new argument
    text. Takes the runtime's ``tool_call_delta`` chunks as they come, and a ``tool_calls`` chunk
    (whole calls: the last word of a local reply, the only word of a remote one) for whatever the
    deltas did not already say. One per streamed reply."""

    def __init__(self) -> None:
        self.sent: dict[int, str] = {}  # index -> arguments sent so far
        self.deltas = False  # whether this reply's calls came as deltas (then whole calls repeat them)

    def updates(self, chunk: Any) -> list[tuple[int, ToolCall | None, str]]:
        if chunk.kind == "tool_call_delta":
            self.deltas = True
            call = (chunk.tool_calls or [None])[0]
            if call is None:
                return []
            if chunk.index not in self.sent:
                self.sent[chunk.index] = call.arguments
                return [(chunk.index, call, call.arguments)]
            self.sent[chunk.index] += call.arguments
            return [(chunk.index, None, call.arguments)] if call.arguments else []
        out: list[tuple[int, ToolCall | None, str]] = []
        base = 0 if self.deltas else len(self.sent)  # without deltas, each chunk's calls are new ones
        for pos, call in enumerate(chunk.tool_calls or []):
            index = base + pos
            sent = self.sent.get(index)
            if sent is None:
                out.append((index, call, call.arguments))
            elif call.arguments.startswith(sent) and call.arguments != sent:
                out.append((index, None, call.arguments[len(sent):]))
            else:
                continue
            self.sent[index] = call.arguments
        return out


def logprob_entries(entries: list[TokenLogprob] | None, with_bytes: bool = True) -> list[dict]:
    """Tokens' log-probabilities in the shape OpenAI's chat ``logprobs.content`` and Ollama's
    ``logprobs`` share: token, logprob, (bytes,) and the most likely alternatives."""

    def one(token: str, logprob: float) -> dict:
        entry: dict[str, Any] = {"token": token, "logprob": logprob}
        if with_bytes:
            entry["bytes"] = list(token.encode("utf-8"))
        return entry

    return [{**one(e.token, e.logprob), "top_logprobs": [one(t, lp) for t, lp in e.top]} for e in entries or []]


def arguments_dict(call: ToolCall) -> dict:
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {"_raw": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def now() -> int:
    return int(time.time())


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()


def cursor_page(items: list[dict[str, Any]], limit: int, order: str, after: str | None = None,
                before: str | None = None) -> dict[str, Any]:
    """One page of OpenAI's cursor lists (files, vector stores): ``items`` oldest first, in ``order``
    (``desc``: newest first), those after the id ``after`` and before the id ``before``, at most ``limit``."""
    ordered = list(reversed(items)) if order == "desc" else list(items)
    ids = [item["id"] for item in ordered]
    start = ids.index(after) + 1 if after in ids else 0
    stop = ids.index(before) if before in ids else len(ordered)
    page = ordered[start:stop][:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": start + len(page) < stop}
