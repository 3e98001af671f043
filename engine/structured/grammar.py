"""Constrained output: JSON Schemas and forced tool calls turned into llama.cpp grammars (GBNF), and
the grammar that forbids tool calls (``tool_choice: "none"``: the tools stay in the prompt, the markup
that opens a call can never be written).

The schema-to-grammar converter is llama-cpp-python's port of llama.cpp's own, made strict by
``strictjson.py`` (no raw control characters, quotes or backslashes inside strings), so what a
grammar admits is what ``json.loads`` accepts; a schema it cannot convert is reported as a clear
error rather than ignored, so "always valid JSON" stays true. Every
schema is walked against the limits in ``limits.py`` before it is converted (so a huge repetition
count never becomes a huge string), the grammar's size is checked after, and each grammar is
compiled once by llama.cpp in a process of its own (``grammarcheck.py``) before it may reach the
runner that other clients share. Every refusal is a ``GrammarRejected`` (HTTP 400) naming its limit.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from ..errors import GrammarRejected, RuntimeFailure
from ..types import ChatRequest
from .grammarcheck import verify
from .limits import check_grammar_size, check_schema


def schema_grammar(schema: dict[str, Any]) -> str:
    """The GBNF grammar for ``schema``, within the limits but not yet compiled (see ``checked``)."""
    check_schema(schema)
    from .strictjson import strict_schema_grammar

    try:
        grammar = strict_schema_grammar(json.loads(json.dumps(schema)))
    except GrammarRejected:
        raise
    except RecursionError:
        raise GrammarRejected("the JSON schema cannot be enforced: it nests too deeply", "depth") from None
    except Exception as exc:
        raise GrammarRejected(f"the JSON schema cannot be enforced: {type(exc).__name__}: {exc}",
                              "unsupported") from exc
    check_grammar_size(grammar)
    return grammar


def checked(grammar: str | None) -> str | None:
    """``grammar`` if it is within the size limits and llama.cpp compiles it in a separate process."""
    if grammar is None or grammar in (json_object_grammar(), no_call_grammar()):  # our own constants
        return grammar
    check_grammar_size(grammar)
    verify(grammar)
    return grammar


def json_object_grammar() -> str:
    from llama_cpp.llama_grammar import JSON_GBNF

    return JSON_GBNF


# the markup that opens a tool call in the templates Fireside renders (templates.py: <tool_call>) and the
# families parsing.py reads ([TOOL_CALLS] for Mistral's, <|python_tag|> for Llama 3's)
CALL_OPENERS = ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>")


@functools.cache
def no_call_grammar() -> str:
    """Any text that never contains one of ``CALL_OPENERS``, for ``tool_choice: "none"``.

    The automaton of a search for the openers, written as one rule per state (the longest end of the
    text so far that begins an opener): each character moves to the next state, and the character that
    would complete an opener has no move, so the model cannot write it and says something else. Every
    state may end the reply. Each rule ends in its next state, so llama.cpp's grammar stack never grows."""
    starts = sorted({o[:i] for o in CALL_OPENERS for i in range(len(o))}, key=lambda p: (len(p), p))
    names = {state: f"s{i}" for i, state in enumerate(starts)}
    alphabet = sorted({c for o in CALL_OPENERS for c in o})
    rules = ["root ::= s0"]
    for state in starts:
        moves: dict[str, list[str]] = {}
        barred = []
        for ch in alphabet:
            text = state + ch
            if any(text.endswith(o) for o in CALL_OPENERS):
                barred.append(ch)
                continue
            nxt = next(text[i:] for i in range(len(text) + 1) if text[i:] in names)
            moves.setdefault(nxt, []).append(ch)
        elsewhere = barred + [c for nxt, chars in moves.items() if nxt for c in chars]
        alts = [f"[^{_chars(elsewhere)}] s0"] + [f"[{_chars(chars)}] {names[nxt]}"
                                                  for nxt, chars in moves.items() if nxt]
        rules.append(f"{names[state]} ::= ({' | '.join(alts)})?")
    return "\n".join(rules) + "\n"


def _chars(chars: list[str]) -> str:
    return "".join(f"\\x{ord(c):02X}" for c in chars)


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
    if request.tools and request.tool_choice == "none":
        return no_call_grammar()
    return None
