"""The grammar for ``tool_choice: "none"`` admits any text but the markup that opens a tool call.

llama.cpp compiles it (the check every grammar passes before a runner sees it), and its rules, run here
as the automaton they spell, refuse each opener wherever it starts, also after a near miss that shares
its beginning (``<<tool_call>``, ``<tool_<tool_call>``), and admit the near misses themselves. The real
model under this grammar is tested in tests/server/test_tool_choice_none.py.
"""

from __future__ import annotations

import re

import pytest

from fireside.engine.structured.grammar import CALL_OPENERS, no_call_grammar
from fireside.engine.structured.grammarcheck import verify

_ALT = re.compile(r"\[(\^?)((?:\\x[0-9A-F]{2})*)\] (s\d+)")


def _rules(grammar: str) -> dict[str, list[tuple[bool, set[str], str]]]:
    rules = {}
    for line in grammar.splitlines()[1:]:
        name, body = line.split(" ::= ")
        rules[name] = [(neg == "^", {chr(int(h, 16)) for h in re.findall(r"\\x([0-9A-F]{2})", chars)}, nxt)
                       for neg, chars, nxt in _ALT.findall(body)]
    return rules


def admits(text: str) -> bool:
    rules, state = _rules(no_call_grammar()), "s0"
    for ch in text:
        nxt = [n for neg, chars, n in rules[state] if (ch not in chars) == neg]
        if not nxt:
            return False
        assert len(nxt) == 1  # a deterministic automaton: one move per character
        state = nxt[0]
    return True  # every state may end the reply


def test_llama_cpp_compiles_it():
    verify(no_call_grammar())


@pytest.mark.parametrize("opener", CALL_OPENERS)
@pytest.mark.parametrize("before", ["", "Sure: ", "<", "<tool_", "[TOOL_", "<|python_", "<<", "[["])
def test_an_opener_is_refused_wherever_it_starts(opener, before):
    assert admits(before + opener[:-1])
    assert not admits(before + opener + ' {"name": "x"}')


@pytest.mark.parametrize("text", ["", "The weather is fine.", "</tool_call>", "<tool_call name=x>", "[TOOL_CALL]",
                                  "<|python|>", "a < b and c[0] = 1", "{\"name\": \"get_weather\"}", "héllo ✓\n"])
def test_text_without_an_opener_is_admitted(text):
    assert admits(text)
