"""Translation helpers every dialect shares: sampling options, message content, tools and usage.

The three dialects name the same knobs differently (``max_tokens``, ``num_predict``,
``max_output_tokens``); each dialect module picks its names and calls ``sampling`` with the engine's,
so the defaults and the checks live here once.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..types import Sampling, ToolCall, Usage
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
                raise ApiError("this server does not take images yet", param="messages")
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
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens}}


def finish_reason(reason: str | None) -> str:
    """The engine's finish reason in OpenAI's words (a cancelled reply simply stopped)."""
    return reason if reason in ("stop", "length", "tool_calls") else "stop"


def now() -> int:
    return int(time.time())


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"{head}data: {payload}\n\n".encode()
