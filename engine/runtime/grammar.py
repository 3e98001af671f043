"""Constrained output: JSON Schemas and forced tool calls turned into llama.cpp grammars (GBNF).

The schema-to-grammar converter is llama-cpp-python's port of llama.cpp's own; a schema it cannot
convert is reported as a clear error rather than ignored, so "always valid JSON" stays true.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import RuntimeFailure
from .types import ChatRequest


def schema_grammar(schema: dict[str, Any]) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        return json_schema_to_gbnf(json.dumps(schema))
    except Exception as exc:
        raise RuntimeFailure(f"the JSON schema cannot be enforced: {exc}") from exc


def json_object_grammar() -> str:
    from llama_cpp.llama_grammar import JSON_GBNF

    return JSON_GBNF


def forced_tool_names(request: ChatRequest) -> list[str] | None:
    """The tools the model must call from (``required`` or a named tool), or None when it may choose."""
    if not request.tools:
        return None
    choice = request.tool_choice
    names = [t.get("function", t).get("name") for t in request.tools]
    if choice == "required":
        return names
    if isinstance(choice, dict):
        name = choice.get("function", choice).get("name")
        if name not in names:
            raise RuntimeFailure(f"tool_choice names {name!r}, which is not among the tools given")
        return [name]
    return None


def tool_call_schema(request: ChatRequest, names: list[str]) -> dict[str, Any]:
    """A schema matching one call: {"name": <one of names>, "arguments": <that tool's parameters>}."""
    options = []
    for tool in request.tools or []:
        fn = tool.get("function", tool)
        if fn.get("name") in names:
            params = fn.get("parameters") or {"type": "object"}
            options.append({"type": "object", "properties": {"name": {"const": fn["name"]}, "arguments": params},
                            "required": ["name", "arguments"]})
    return options[0] if len(options) == 1 else {"anyOf": options}


def grammar_for(request: ChatRequest) -> str | None:
    """The grammar that constrains this request's reply, if any."""
    forced = forced_tool_names(request) if request.tool_choice != "none" else None
    if forced:
        return schema_grammar(tool_call_schema(request, forced))
    if request.json_schema is not None:
        return schema_grammar(request.json_schema)
    if request.json_mode:
        return json_object_grammar()
    return None
