"""A scripted stand-in for ``Runtime.chat``, for the tool loop's own logic (approval memory, the step
limit, calls that cannot run) where what the model says must be exact; the real model is exercised in
tests/engine/mcp/test_mcp_loop.py."""

from __future__ import annotations

from collections.abc import Iterator

from fireside.engine.types import ChatRequest, Chunk, ToolCall, Usage


class ScriptedRuntime:
    """Replies from a script: each item is answer text, or a list of ``(name, arguments_json)`` calls.
    Once the script runs out it answers "done". Records every request it was given."""

    def __init__(self, script: list[str | list[tuple[str, str]]]):
        self.script = list(script)
        self.requests: list[ChatRequest] = []

    def chat(self, model_id: str, request: ChatRequest, cancel=None) -> Iterator[Chunk]:
        self.requests.append(request)
        reply = self.script.pop(0) if self.script else "done"
        if isinstance(reply, str) or request.tool_choice == "none":
            yield Chunk("text", reply if isinstance(reply, str) else "no more tools")
            yield Chunk("done", finish_reason="stop", usage=Usage())
            return
        yield Chunk("tool_calls", tool_calls=[ToolCall(name, args) for name, args in reply])
        yield Chunk("done", finish_reason="tool_calls", usage=Usage())
