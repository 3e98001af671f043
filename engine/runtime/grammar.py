"""Constrained output: JSON Schemas and forced tool calls turned into llama.cpp grammars (GBNF).

The schema-to-grammar converter is llama-cpp-python's port of llama.cpp's own; a schema it cannot
convert is reported as a clear error rather than ignored, so "always valid JSON" stays true. Every
schema is walked against the limits in ``limits.py`` before it is converted (so a huge repetition
count never becomes a huge string), the grammar's size is checked after, and each grammar is
compiled once by llama.cpp in a process of its own (``grammarcheck.py``) before it may reach the
runner that other clients share. Every refusal is a ``GrammarRejected`` (HTTP 400) naming its limit.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import GrammarRejected, RuntimeFailure
from ..types import ChatRequest
from .grammarcheck import verify
from .limits import check_grammar_size, check_schema


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar for ``schema``, within the limits but not yet compiled (see ``checked``)."""
    check_schema(schema)
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    try:
        grammar = json_schema_to_gbnf(json.dumps(schema))
    except RecursionError:
        raise GrammarRejected("the JSON schema cannot be enforced: it nests too deeply", "depth") from None
    except Exception as exc:
        raise GrammarRejected(f"the JSON schema cannot be enforced: {type(exc).__name__}: {exc}",
                              "unsupported") from exc
    check_grammar_size(grammar)
    return grammar


def checked(grammar: str | None) -> str | None:
    """``grammar`` if it is within the size limits and llama.cpp compiles it in a separate process."""
    if grammar is None or grammar == json_object_grammar():
        return grammar
    check_grammar_size(grammar)
    verify(grammar)
    return grammar


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
    """The grammar that constrains this request's reply, if any, not yet compiled (see ``checked``)."""
    forced = forced_tool_names(request) if request.tool_choice != "none" else None
    if forced:
        return schema_grammar(tool_call_schema(request, forced))
    if request.json_schema is not None:
        return schema_grammar(request.json_schema)
    if request.json_mode:
        return json_object_grammar()
    return None
