"""The chat tool loop: generate, let the user approve each tool call, run it, feed the result back, repeat.

``ToolLoop`` is the non-widget half of a chat with tools, shared by the chat window and ``fireside chat
--tools``. One round: the model's reply streams through ``Runtime.chat`` (local models parse tool calls
from their text, remote engines return them structured; both arrive as a ``tool_calls`` chunk); each
call is shown to ``approve(call)``, which answers ``"run"``, ``"deny"`` or ``"always"`` (run, and run
this tool again in this loop without asking). An approved call runs on its MCP server through the hub;
a denied one goes back to the model as a tool result saying the user denied it; a call that cannot
run (unknown tool, arguments that are not a JSON object, a server error) goes back as an error. Then
the model continues, up to ``max_steps`` rounds of calls; the last round offers no tools, so the model
must answer with what it has. Setting ``cancel`` stops the loop between tokens and between calls.

Threading: ``run`` blocks the calling thread (never the GUI thread); ``approve`` and the ``on_*``
callbacks are called on that thread, so a GUI must hand them to its main thread and wait.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import McpServerError
from ..types import ChatRequest, Chunk, Sampling, ToolCall, Usage
from .results import McpTool, ToolResult, openai_tools
from .toolhub import McpHub

DENIED = "The user denied this call to {tool}; it was not run. Do not call it again unless the user asks."


@dataclass
class PendingCall:
    """A tool call the model asked for, as ``approve`` sees it: the server, tool and full arguments."""

    id: str
    function: str  # the name the model used
    server: str
    tool: str
    arguments: dict[str, Any] | None  # None when the model's arguments are not a JSON object
    raw_arguments: str
    problem: str = ""  # why it cannot run at all (no approval is asked then)

    def pretty_arguments(self) -> str:
        if self.arguments is None:
            return self.raw_arguments
        return json.dumps(self.arguments, indent=2, ensure_ascii=False)


@dataclass
class ToolStep:
    """One call and what came of it: ``outcome`` is run, denied, error or cancelled."""

    call: PendingCall
    outcome: str
    content: str  # what went back to the model
    result: ToolResult | None = None


@dataclass
class LoopResult:
    messages: list[dict[str, Any]]  # the new messages, in order: assistant calls, tool results, the answer
    steps: list[ToolStep] = field(default_factory=list)
    finish_reason: str = "stop"  # stop, length or cancelled
    usage: Usage | None = None
    hit_step_limit: bool = False

    @property
    def text(self) -> str:
        last = self.messages[-1] if self.messages else {}
        return (last.get("content") or "") if last.get("role") == "assistant" else ""


Approve = Callable[[PendingCall], str]


class ToolLoop:
    """Generation with MCP tools for one chat; keeps the chat's "always allow" choices between runs."""

    def __init__(self, runtime: Any, hub: McpHub, tools: list[McpTool], approve: Approve, *, max_steps: int = 8,
                 on_chunk: Callable[[Chunk], None] | None = None, on_step: Callable[[ToolStep], None] | None = None):
        self.runtime, self.hub, self.approve = runtime, hub, approve
        self.specs, self.by_name = openai_tools(tools)
        self.max_steps = max(0, max_steps)
        self.on_chunk, self.on_step = on_chunk, on_step
        self.always: set[tuple[str, str]] = set()

    def run(self, model_id: str, messages: list[dict[str, Any]], sampling: Sampling | None = None,
            cancel: threading.Event | None = None, tool_choice: str | dict[str, Any] = "auto") -> LoopResult:
        """Answer ``messages``, running tools as approved. ``tool_choice`` applies to the first round
        only (a forced call every round would never end)."""
        cancel = cancel or threading.Event()
        out = LoopResult(messages=[])
        for step in range(self.max_steps + 1):
            last = step == self.max_steps
            choice = "none" if last or not self.specs else tool_choice if step == 0 else "auto"
            request = ChatRequest(messages=messages + out.messages, sampling=sampling or Sampling(),
                                  tools=self.specs or None, tool_choice=choice)
            text, calls, done = self._generate(model_id, request, cancel)
            out.usage, out.finish_reason = done.usage, done.finish_reason or "stop"
            if cancel.is_set():
                out.finish_reason = "cancelled"
            if not calls or cancel.is_set():
                out.messages.append({"role": "assistant", "content": text})
                out.hit_step_limit = last and step > 0
                return out
            self._round(calls, text, out, cancel)
            if cancel.is_set():
                out.finish_reason = "cancelled"
                return out
        return out  # unreachable: the last round offers no tools

    def _generate(self, model_id: str, request: ChatRequest,
                  cancel: threading.Event) -> tuple[str, list[ToolCall], Chunk]:
        text, calls, done = [], [], Chunk("done", finish_reason="stop")
        for chunk in self.runtime.chat(model_id, request, cancel=cancel):
            if chunk.kind == "text":
                text.append(chunk.text)
            elif chunk.kind == "tool_calls":
                calls += chunk.tool_calls or []
            elif chunk.kind == "done":
                done = chunk
            if self.on_chunk:
                self.on_chunk(chunk)
        return "".join(text), calls, done

    def _round(self, calls: list[ToolCall], text: str, out: LoopResult, cancel: threading.Event) -> None:
        """Record the model's calls, then answer each one (run, denied, or why it could not run)."""
        pending = [self._pending(call, i, len(out.steps)) for i, call in enumerate(calls)]
        out.messages.append({"role": "assistant", "content": text, "tool_calls": [
            {"id": p.id, "type": "function", "function": {"name": p.function, "arguments": p.raw_arguments}}
            for p in pending]})
        for call in pending:
            step = self._answer(call, cancel)
            out.steps.append(step)
            out.messages.append({"role": "tool", "tool_call_id": call.id, "name": call.function,
                                 "content": step.content})
            if self.on_step:
                self.on_step(step)

    def _pending(self, call: ToolCall, index: int, done_before: int) -> PendingCall:
        call_id = call.id or f"call_{done_before + index + 1}"
        tool = self.by_name.get(call.name)
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError:
            arguments = None
        pending = PendingCall(call_id, call.name, tool.server if tool else "", tool.name if tool else call.name,
                              arguments if isinstance(arguments, dict) else None, call.arguments or "{}")
        if tool is None:
            pending.problem = f"There is no tool named {call.name!r}."
        elif pending.arguments is None:
            pending.problem = f"The arguments for {call.name} were not a JSON object: {call.arguments[:200]}"
        return pending

    def _answer(self, call: PendingCall, cancel: threading.Event) -> ToolStep:
        if call.problem:
            return ToolStep(call, "error", f"Error: {call.problem}")
        if cancel.is_set():
            return ToolStep(call, "cancelled", "The user stopped the reply before this call ran.")
        if (call.server, call.tool) not in self.always:
            decision = self.approve(call)
            if decision == "always":
                self.always.add((call.server, call.tool))
            elif decision != "run":
                return ToolStep(call, "denied", DENIED.format(tool=call.tool))
        if cancel.is_set():
            return ToolStep(call, "cancelled", "The user stopped the reply before this call ran.")
        try:
            result = self.hub.call(call.server, call.tool, call.arguments, cancel=cancel)
        except McpServerError as exc:
            outcome = "cancelled" if cancel.is_set() else "error"
            return ToolStep(call, outcome, f"Error: the tool could not run: {exc}")
        content = f"The tool reported an error:\n{result.text}" if result.is_error else result.text
        return ToolStep(call, "run", content, result)
