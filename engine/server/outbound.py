"""Translation helpers every dialect shares: sampling options, message content, tools and usage.

The three dialects name the same knobs differently (``max_tokens``, ``num_predict``,
``max_output_tokens``); each dialect module picks its names and calls ``sampling`` with the engine's,
so the defaults and the checks live here once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Literal

from ..types import Chunk, Sampling, TokenLogprob, ToolCall, Usage
from .errors import ApiError

MAX_STOPS = 16


def sampling(**given: Any) -> Sampling:
    """A ``Sampling`` from the options a client gave (None means "not given": keep the default)."""
    s = Sampling()
    for name, value in given.items():
        if value is None:
            continue
        if name == "stop":
            value = [value] if isinstance(value, str) else list(value)
            if len(value) > MAX_STOPS:
                raise ApiError(f"at most {MAX_STOPS} stop strings", param="stop")
        if name == "max_tokens" and value is not None and value < 1:
            raise ApiError("max_tokens must be at least 1", param="max_tokens")
        if name == "seed" and value < 0:
            continue  # -1: a random seed, as Ollama and llama.cpp read it
        setattr(s, name, value)
    return s


Refusal = tuple[str, Callable[[Any], bool], str]  # (field, "is this value refused?", why)


def given(value: Any) -> bool:
    """A field a client really set: not absent, null, false, empty or zero."""
    return value not in (None, False, "", 0) and value != [] and value != {}


def refuse(body: Any, refusals: list[Refusal]) -> None:
    """A 400 naming the first field whose value this server cannot honour, where ignoring it would
    change the result (``n: 2``, ``logit_bias``, audio...). Fields this server does not declare are
    read from the body's extras, so an undeclared field can be refused too."""
    extra = getattr(body, "model_extra", None) or {}
    for name, refused, why in refusals:
        value = getattr(body, name, None) if name in type(body).model_fields else extra.get(name)
        if refused(value):
            raise ApiError(f"{name}: {why}", param=name)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or a list of text parts (images are refused)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") in ("image_url", "image", "input_image"):
                raise ApiError("messages: this server does not take images yet (its models read text only)",
                               param="messages")
            elif isinstance(part, dict) and part.get("type") not in ("refusal", "thinking", "redacted_thinking"):
                kind = part.get("type")  # audio, files, documents...: ignoring them would change the answer
                raise ApiError(f"messages: content parts of type {kind!r} are not supported (text only)",
                               param="messages")
        return "".join(parts)
    raise ApiError("message content must be a string or a list of text parts", param="messages")


def check_tool_choice(tools: list[dict] | None, choice: Any) -> str | dict:
    """OpenAI's ``tool_choice`` checked against the tools given, in the engine's form."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ApiError(f"tool_choice must be auto, none, required or a named function, not {choice!r}",
                           param="tool_choice")
        if choice == "required" and not tools:
            raise ApiError("tool_choice is required but no tools were given", param="tool_choice")
        return choice
    name = (choice.get("function") or choice).get("name") if isinstance(choice, dict) else None
    names = [(t.get("function") or t).get("name") for t in tools or []]
    if name not in names:
        raise ApiError(f"tool_choice names {name!r}, which is not among the tools given", param="tool_choice")
    return {"name": name}


def openai_tool_calls(calls: list[ToolCall]) -> list[dict]:
    return [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls]


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


def logprobs_option(wanted: bool | None, top: int | None, field: str = "top_logprobs") -> int | None:
    """The runtime's ``Sampling.logprobs`` from a ``logprobs`` flag and a ``top_logprobs`` count."""
    if top is not None and not wanted:
        raise ApiError(f"{field} needs logprobs: true", param=field)
    return (top or 0) if wanted else None


def first_call_only(chunks: Iterator[Chunk]) -> Iterator[Chunk]:
    """``parallel_tool_calls: false``: a reply keeps its first tool call and drops any others."""
    return at_most_calls(chunks, 1)


def at_most_calls(chunks: Iterator[Chunk], limit: int) -> Iterator[Chunk]:
    """A reply that keeps its first ``limit`` tool calls and drops any others (the Responses API's
    ``max_tool_calls``, and ``parallel_tool_calls: false`` as a limit of one)."""
    for chunk in chunks:
        if chunk.kind == "tool_call_delta" and chunk.index >= limit:
            continue
        if chunk.kind == "tool_calls":
            chunk = replace(chunk, tool_calls=(chunk.tool_calls or [])[:limit])
        yield chunk


def arguments_dict(call: ToolCall) -> dict:
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {"_raw": call.arguments}
    return value if isinstance(value, dict) else {"value": value}


def openai_usage(usage: Usage | None) -> dict:
    u = usage or Usage()
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}


Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]  # OpenAI's ReasoningEffort


def effort_switch(effort: str | None) -> bool | None:
    """OpenAI's reasoning effort as the template's ``enable_thinking``: ``none`` turns thinking off, any
    other level asks for it (templates here have a switch, not a scale), absent leaves the default."""
    return None if effort is None else effort != "none"


def finish_reason(reason: str | None) -> str:
    """The engine's finish reason in OpenAI's words (a cancelled reply simply stopped)."""
    return reason if reason in ("stop", "length", "tool_calls") else "stop"


def now() -> int:
    return int(time.time())


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()
