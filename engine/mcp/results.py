"""What MCP servers hand back, as plain values: tools, and call results turned into untrusted text.

A tool result is whatever a third-party process chose to send, so it becomes plain text only: text
parts as they are, images and audio as a one-line placeholder, embedded resources as their text or a
placeholder, links as their URI. Nothing is rendered or followed. A result past ``max_chars`` is cut
with a note saying how much there was, so a server returning a megabyte cannot flood a context window.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import McpServerError

DEFAULT_MAX_CHARS = 50_000
_FN_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class McpTool:
    server: str
    name: str
    description: str = ""
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})


@dataclass
class ToolResult:
    """A call's outcome as text; ``is_error`` when the tool itself reported a failure."""

    text: str
    is_error: bool = False
    truncated: bool = False
    chars: int = 0  # how long the text was before truncation


def tools_from(server: str, result: Any) -> list[McpTool]:
    """``McpTool`` values from a ``ListToolsResult``; a malformed entry is a clear error."""
    tools = []
    for tool in getattr(result, "tools", None) or []:
        name = getattr(tool, "name", None)
        schema = getattr(tool, "inputSchema", None) or {"type": "object"}
        if not isinstance(name, str) or not name or not isinstance(schema, dict):
            raise McpServerError(f"MCP server {server!r} listed a malformed tool: {str(tool)[:200]}")
        tools.append(McpTool(server, name, getattr(tool, "description", None) or "", schema))
    return tools


def _part_text(part: Any) -> str:
    kind = getattr(part, "type", "")
    if kind == "text":
        return str(part.text)
    if kind in ("image", "audio"):
        return f"[{kind}: {getattr(part, 'mimeType', '?')}, {len(getattr(part, 'data', '') or '') * 3 // 4:,} bytes]"
    if kind == "resource":
        res = part.resource
        text = getattr(res, "text", None)
        return str(text) if text is not None else f"[binary resource {res.uri} ({getattr(res, 'mimeType', '?')})]"
    if kind == "resource_link":
        return f"[resource link: {part.uri}]"
    return f"[{kind or 'unknown'} content]"


def result_from(server: str, tool: str, result: Any, max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    """A ``CallToolResult`` as a ``ToolResult``, cut at ``max_chars`` with a note."""
    content = getattr(result, "content", None)
    if not isinstance(content, list):
        raise McpServerError(f"MCP server {server!r} answered {tool!r} with a malformed result")
    text = "\n".join(_part_text(p) for p in content)
    structured = getattr(result, "structuredContent", None)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    return truncate(text, bool(getattr(result, "isError", False)), max_chars)


def truncate(text: str, is_error: bool = False, max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    if len(text) <= max_chars:
        return ToolResult(text, is_error, False, len(text))
    note = (f"\n\n[Fireside truncated this tool result: it was {len(text):,} characters; "
            f"only the first {max_chars:,} are shown.]")
    return ToolResult(text[:max_chars] + note, is_error, True, len(text))


def function_name(tool: McpTool, qualified: bool) -> str:
    """The OpenAI function name for ``tool``: its own name, or ``server__name`` where names collide."""
    raw = f"{tool.server}__{tool.name}" if qualified else tool.name
    return _FN_NAME_RE.sub("_", raw)[:64]


def openai_tools(tools: list[McpTool]) -> tuple[list[dict[str, Any]], dict[str, McpTool]]:
    """``tools`` as OpenAI function tools, and a map from each function name back to its MCP tool."""
    counts: dict[str, int] = {}
    for tool in tools:
        counts[tool.name] = counts.get(tool.name, 0) + 1
    specs, by_name = [], {}
    for tool in tools:
        fn = function_name(tool, counts[tool.name] > 1)
        by_name[fn] = tool
        specs.append({"type": "function", "function": {"name": fn, "description": tool.description,
                                                       "parameters": tool.input_schema}})
    return specs, by_name
