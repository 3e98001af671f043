"""Reasoning and tool-call parsing of streamed text, fed in the awkward pieces real decoding produces."""

from __future__ import annotations

import json

import pytest

from fireside.engine.structured.parsing import StreamParser, parse_tool_calls, prompt_opens_reasoning


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


@pytest.mark.parametrize("prompt,closer", [
    ("<|im_start|>assistant\n<think>\n", "</think>"),  # Qwen3, and SmolLM2 in tests/server/test_reasoning.py
    ("<｜Assistant｜><think>\n", "</think>"),  # DeepSeek-R1
    ("<|im_start|>assistant\n<think>\n\n</think>\n\n", None),  # Qwen3 with thinking turned off
    ("<|im_start|>assistant\n", None),
    ("User: what is <think>?\nAssistant:", None),
])
def test_a_prompt_that_ends_with_an_opener_leaves_the_reply_in_reasoning(prompt, closer):
    assert prompt_opens_reasoning(prompt) == closer


@pytest.mark.parametrize("split", [lambda s: [s], char_pieces])
def test_a_reply_that_starts_inside_reasoning_splits_at_the_closer(split):
    text, thought, _ = run(split("The user greets me.\n</think>\n\nHello there!"), opened="</think>")
    assert (thought, text) == ("The user greets me.\n", "Hello there!")
    assert run(split("never closed"), opened="</think>")[:2] == ("", "never closed")


def test_a_reply_opened_in_reasoning_stays_whole_with_reasoning_off():
    text, thought, _ = run(["hmm\n</think>\nHi"], opened="</think>", reasoning=False)
    assert (text, thought) == ("hmm\n</think>\nHi", "")


def test_tools_are_still_found_after_reasoning_the_prompt_opened():
    raw = 'I should call it.</think>\n<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    text, thought, calls = run(char_pieces(raw), opened="</think>", tools=True)
    assert thought == "I should call it." and text == ""
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("f", {"x": 1})]


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


def deltas(pieces: list[str], **kw) -> tuple[list, list]:
    parser = StreamParser(tools=True, **kw)
    chunks = [c for p in pieces for c in parser.feed(p)] + list(parser.finish())
    streamed = [(c.index, c.tool_calls[0]) for c in chunks if c.kind == "tool_call_delta"]
    whole = [call for c in chunks if c.kind == "tool_calls" for call in c.tool_calls]
    return streamed, whole


@pytest.mark.parametrize("raw", [
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}\n</tool_call>',
    '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}]',
    '{"type": "function", "function": {"name": "get_weather", "parameters": {"city": "Paris", "days": [1, 2]}}}',
])
def test_a_call_streams_its_name_first_then_argument_fragments_that_add_up(raw):
    streamed, whole = deltas(char_pieces(raw))
    head, *fragments = streamed
    assert head[1].name == "get_weather" and head[1].id.startswith("call_") and head[1].arguments == ""
    assert len(fragments) > 5  # fragments as the characters came, not one piece at the end
    assert "".join(f.arguments for _, f in fragments) == whole[0].arguments
    assert json.loads(whole[0].arguments) == {"city": "Paris", "days": [1, 2]}
    assert whole[0].id == head[1].id


def test_several_calls_stream_under_their_own_indices():
    raw = ('<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n'
           '<tool_call>{"name": "b", "arguments": {"y": "}{"}}</tool_call>')
    streamed, whole = deltas(char_pieces(raw))
    for index, call in enumerate(whole):
        mine = [d for i, d in streamed if i == index]
        assert mine[0].name == call.name and mine[0].id == call.id
        assert "".join(d.arguments for d in mine[1:]) == call.arguments
    assert [json.loads(c.arguments) for c in whole] == [{"x": 1}, {"y": "}{"}]


def test_a_call_cut_short_keeps_its_name_and_fragment():
    streamed, whole = deltas(['{"name": "get_weather", "arguments": {"city": "Par'], forced_tool=True)
    assert [(c.name, c.arguments) for c in whole] == [("get_weather", '{"city": "Par')]
    assert "".join(d.arguments for _, d in streamed) == '{"city": "Par'


def test_arguments_given_as_json_text_are_sent_once_decoded():
    streamed, whole = deltas(['{"name": "f", "arguments": "{\\"a\\": 1}"}'], forced_tool=True)
    assert whole[0].arguments == '{"a": 1}'
    assert "".join(d.arguments for _, d in streamed) == '{"a": 1}'


def test_a_held_back_end_is_exactly_the_longest_that_can_still_grow_into_a_marker():
    """What a stream holds back at each piece (``_partial_suffix``, looked up in a table of the markers'
    starts since it cost a fifth of the server's time per token) against the plain definition, on text
    that ends in every start of every marker and in random markup."""
    import random

    from fireside.engine.structured import parsing

    def plain(text: str, markers: list[str]) -> int:
        return max((n for m in markers for n in range(1, min(len(m) - 1, len(text)) + 1) if m.startswith(text[-n:])),
                   default=0)

    markers = ([o for o, _ in parsing.THINK_MARKERS] + [c for _, c in parsing.THINK_MARKERS] + parsing.TOOL_OPENERS
               + parsing.ECHO_MARKERS)
    rng = random.Random(7)
    alphabet = "".join(sorted(set("".join(markers)))) + " ab\n"
    texts = [f"some reply {m[:n]}" for m in markers for n in range(len(m) + 1)]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(3000)]
    held = 0
    for text in texts:
        for subset in (markers, parsing.ECHO_MARKERS, ["</think>"]):
            assert parsing._partial_suffix(text, subset) == plain(text, subset), (text, subset)
            held += plain(text, subset) > 0
    assert held > 500  # the check saw many ends held back, not only zeros
