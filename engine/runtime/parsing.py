"""Turn a model's raw text stream into what a user reads: answer text, reasoning, and tool calls.

``StreamParser`` is fed text pieces as they decode and yields typed ``Chunk``s: text inside
``<think>...</think>`` (or the markers a template declares) becomes ``reasoning``; with tools offered,
text that opens a tool call (``<tool_call>``, ``[TOOL_CALLS]``, or a bare JSON object at the start of
the reply) is held back and parsed into structured ``ToolCall``s when the reply ends. Partial markers
split across pieces are held until they can be decided, so no marker leaks into the answer.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

from ..types import Chunk, ToolCall

THINK_MARKERS = [("<think>", "</think>"), ("<thinking>", "</thinking>"), ("<|channel|>analysis<|message|>", "<|end|>")]
TOOL_OPENERS = ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "```json\n{", "{"]
_TOOL_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def _partial_suffix(text: str, markers: list[str]) -> int:
    """Length of the longest end of ``text`` that could still grow into one of ``markers``."""
    best = 0
    for marker in markers:
        for n in range(min(len(marker) - 1, len(text)), 0, -1):
            if marker.startswith(text[-n:]):
                best = max(best, n)
                break
    return best


class StreamParser:
    """Splits one reply's text into reasoning, answer and tool calls. Not thread-safe: one per reply."""

    def __init__(self, *, tools: bool = False, reasoning: bool = True, forced_tool: bool = False):
        self.tools, self.reasoning, self.forced_tool = tools, reasoning, forced_tool
        self.pending = ""
        self.in_think: str | None = None  # the closing marker while inside reasoning
        self.started = False  # any answer text seen yet
        self.tool_text: str | None = "" if forced_tool else None

    def feed(self, piece: str) -> Iterator[Chunk]:
        if self.tool_text is not None:
            self.tool_text += piece
            return
        self.pending += piece
        yield from self._drain(final=False)

    def _drain(self, final: bool) -> Iterator[Chunk]:
        while self.pending:
            if self.in_think:
                idx = self.pending.find(self.in_think)
                if idx >= 0:
                    if idx:
                        yield Chunk("reasoning", self.pending[:idx])
                    self.pending = self.pending[idx + len(self.in_think):].lstrip("\n")
                    self.in_think = None
                    continue
                keep = 0 if final else _partial_suffix(self.pending, [self.in_think])
                out, self.pending = self.pending[: len(self.pending) - keep], self.pending[len(self.pending) - keep:]
                if out:
                    yield Chunk("reasoning", out)
                return
            opened = self._open_marker()
            if opened is None:  # undecided: wait for more text
                if final:
                    yield from self._emit_text(self.pending)
                    self.pending = ""
                return
            kind, idx, marker = opened
            if kind == "none":
                yield from self._emit_text(self.pending[:idx])
                self.pending = self.pending[idx:]
                return
            if idx:
                yield from self._emit_text(self.pending[:idx])
            if kind == "think":
                self.in_think = marker
                self.pending = self.pending[idx + len(next(o for o, c in THINK_MARKERS if c == marker)):]
            else:  # a tool call: hold everything from here to the end of the reply
                self.tool_text = self.pending[idx:]
                self.pending = ""
                return

    def _open_marker(self) -> tuple[str, int, str] | None:
        """Find the next think/tool opener in ``pending``: (kind, index, closing marker), or "none" with the
        index up to which text is safe to emit, or None if the start of ``pending`` is undecided."""
        openers = [o for o, _ in THINK_MARKERS] if self.reasoning else []
        tool_openers = TOOL_OPENERS if self.tools else []
        if tool_openers and not self.started:
            stripped = self.pending.lstrip()
            lead = len(self.pending) - len(stripped)
            for opener in tool_openers:
                if stripped.startswith(opener):
                    return ("tool", lead, "")
            if any(o.startswith(stripped) for o in tool_openers) or not stripped:
                return None
        hits = [(self.pending.find(o), o) for o in openers + [t for t in tool_openers if t.startswith("<") or t.startswith("[")]]
        hits = [(i, o) for i, o in hits if i >= 0]
        if hits:
            idx, opener = min(hits)
            close = next((c for o, c in THINK_MARKERS if o == opener), None)
            return ("think", idx, close) if close else ("tool", idx, "")
        keep = _partial_suffix(self.pending, openers + [t for t in tool_openers if t[0] in "<["])
        safe = len(self.pending) - keep
        if safe == 0:
            return None
        return ("none", safe, "")

    def _emit_text(self, text: str) -> Iterator[Chunk]:
        if not text:
            return
        if not self.started:
            text = text.lstrip("\n") if self.reasoning else text
            if not text:
                return
            self.started = True
        yield Chunk("text", text)

    def finish(self) -> Iterator[Chunk]:
        """Flush held text; yields a ``tool_calls`` chunk if the reply was a tool call."""
        yield from self._drain(final=True)
        if self.tool_text is not None:
            calls = parse_tool_calls(self.tool_text)
            if calls:
                yield Chunk("tool_calls", tool_calls=calls)
            elif self.tool_text.strip():
                self.started = True
                yield Chunk("text", self.tool_text)


def _call_from(obj: object) -> ToolCall | None:
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function") if isinstance(obj.get("function"), dict) else obj
    name = fn.get("name")
    args = fn.get("arguments", fn.get("parameters", {}))
    if not isinstance(name, str) or not name:
        return None
    if not isinstance(args, str):
        args = json.dumps(args, ensure_ascii=False)
    return ToolCall(name=name, arguments=args, id=f"call_{uuid.uuid4().hex[:24]}")


def _json_values(text: str) -> list[object]:
    """Every JSON value that starts at a '{' or '[' in ``text``, left to right, non-overlapping."""
    decoder, values, i = json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
                values.append(value)
                i = end
                continue
            except json.JSONDecodeError:
                pass
        i += 1
    return values


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Parse the tool calls in a finished reply, in any of the common formats models use."""
    blocks = _TOOL_BLOCK.findall(text) or [text.replace("[TOOL_CALLS]", "").replace("<|python_tag|>", "")]
    calls: list[ToolCall] = []
    for block in blocks:
        for value in _json_values(block):
            for item in value if isinstance(value, list) else [value]:
                call = _call_from(item)
                if call:
                    calls.append(call)
    return calls
