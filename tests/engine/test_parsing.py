"""Reasoning and tool-call parsing of streamed text, fed in the awkward pieces real decoding produces."""

from __future__ import annotations

import json

import pytest

from fireside.engine.runtime.parsing import StreamParser, parse_tool_calls


def run(pieces: list[str], **kw) -> tuple[str, str, list]:
    parser = StreamParser(**kw)
    chunks = [c for p in pieces for c in parser.feed(p)] + list(parser.finish())
    text = "".join(c.text for c in chunks if c.kind == "text")
    thought = "".join(c.text for c in chunks if c.kind == "reasoning")
    calls = [call for c in chunks if c.kind == "tool_calls" for call in c.tool_calls]
    return text, thought, calls


def char_pieces(s: str) -> list[str]:
    return list(s)


@pytest.mark.parametrize("split", [lambda s: [s], char_pieces])
def test_think_block_becomes_reasoning_and_never_leaks(split):
    text, thought, _ = run(split("<think>The user greets me.</think>\n\nHello there!"))
    assert thought == "The user greets me."
    assert text == "Hello there!"


def test_text_that_only_looks_like_a_marker_is_kept():
    text, thought, _ = run(char_pieces("a < b and <thin ice>"))
    assert text == "a < b and <thin ice>" and thought == ""


def test_unclosed_think_is_all_reasoning():
    text, thought, _ = run(["<think>still thinking"])
    assert (text, thought) == ("", "still thinking")


@pytest.mark.parametrize("raw", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    '{"name": "get_weather", "parameters": {"city": "Paris"}}',
    '<|python_tag|>{"name": "get_weather", "arguments": {"city": "Paris"}}',
])
def test_tool_call_formats_parse_into_structured_calls(raw):
    text, _, calls = run(char_pieces(raw), tools=True)
    assert text == ""
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert calls[0].id.startswith("call_")


def test_two_calls_in_one_reply():
    calls = parse_tool_calls('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'
                             '<tool_call>{"name": "b", "arguments": {"x": 1}}</tool_call>')
    assert [c.name for c in calls] == ["a", "b"]


def test_without_tools_json_is_just_text():
    text, _, calls = run(['{"name": "x", "arguments": {}}'], tools=False)
    assert calls == [] and text.startswith("{")


def test_plain_answer_with_tools_offered_streams_as_text():
    text, _, calls = run(char_pieces("The weather is nice."), tools=True)
    assert text == "The weather is nice." and calls == []


def test_a_failed_tool_call_comes_back_as_text_not_lost():
    text, _, calls = run(["<tool_call>not json at all"], tools=True)
    assert calls == [] and "not json at all" in text
