"""``tool_choice: "none"`` keeps the tools in the prompt and forbids calls (issue 27).

The same request under ``auto`` and ``none`` has the same prompt (so the same token count, and the
second reuses the first's prefix cache), and a request that makes the starter model call a tool under
``auto`` gets no call under ``none``, in every dialect that has a tool choice (OpenAI chat, Responses,
Anthropic ``{"type": "none"}``), streamed or not, with a finish that is the model's own end or its
token limit. Through the official clients on a real server over the real model, greedy.
"""

from __future__ import annotations

import anthropic
import openai
import pytest

pytestmark = pytest.mark.model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
# greedy, the starter answers this with a whole get_weather call when it may call tools
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
ASK = [{"role": "user", "content": f"Repeat after me: {CALL}"}]


@pytest.fixture(scope="module")
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def claude(base_url):
    return anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=300)


def _chat(oai, choice: str, max_tokens: int = 60, **kw):
    return oai.chat.completions.create(model="starter", messages=ASK, tools=[WEATHER], tool_choice=choice,
                                       temperature=0, max_tokens=max_tokens, **kw)


def test_none_keeps_the_prompt_of_auto_and_makes_no_call(oai):
    auto = _chat(oai, "auto")
    assert auto.choices[0].message.tool_calls, "the starter no longer calls the tool here under auto"
    none = _chat(oai, "none")
    assert none.usage.prompt_tokens == auto.usage.prompt_tokens  # the tools are still in the prompt
    # the same prompt: the second request reuses what the first left in the prefix cache
    assert none.usage.prompt_tokens_details.cached_tokens >= none.usage.prompt_tokens - 2
    choice = none.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason in ("stop", "length")
    assert choice.message.content and "<tool_call>" not in choice.message.content


def test_a_streamed_reply_under_none_has_no_tool_call_deltas(oai):
    events = list(_chat(oai, "none", stream=True, stream_options={"include_usage": True}))
    assert events[-1].usage.prompt_tokens == _chat(oai, "auto", max_tokens=1).usage.prompt_tokens
    assert not [e for e in events if e.choices and e.choices[0].delta.tool_calls]
    finishes = [e.choices[0].finish_reason for e in events if e.choices and e.choices[0].finish_reason]
    assert finishes in (["stop"], ["length"])
    text = "".join(e.choices[0].delta.content or "" for e in events if e.choices)
    assert text and "<tool_call>" not in text


def test_responses_under_none_keep_the_prompt_and_have_no_function_call(oai):
    tool = {"type": "function", **WEATHER["function"]}
    replies = {choice: oai.responses.create(model="starter", input=ASK, tools=[tool], tool_choice=choice,
                                            temperature=0, max_output_tokens=60) for choice in ("auto", "none")}
    assert [item.type for item in replies["auto"].output] == ["function_call"]
    assert replies["none"].usage.input_tokens == replies["auto"].usage.input_tokens
    assert [item.type for item in replies["none"].output] == ["message"]
    assert replies["none"].output_text and replies["none"].status in ("completed", "incomplete")


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_tool_choice_none_keeps_the_prompt_and_makes_no_tool_use(claude, stream):
    fn = WEATHER["function"]
    tool = {"name": fn["name"], "description": fn["description"], "input_schema": fn["parameters"]}
    kw = dict(model="starter", max_tokens=60, messages=ASK, tools=[tool], extra_body={"temperature": 0})
    counts = {kind: claude.messages.count_tokens(model="starter", messages=ASK, tools=[tool],
                                                 tool_choice={"type": kind}).input_tokens
              for kind in ("auto", "none")}
    assert counts["none"] == counts["auto"]
    auto = claude.messages.create(**kw, tool_choice={"type": "auto"})
    assert auto.stop_reason == "tool_use"
    if stream:
        with claude.messages.stream(**kw, tool_choice={"type": "none"}) as events:
            none = events.get_final_message()
    else:
        none = claude.messages.create(**kw, tool_choice={"type": "none"})
    assert [block.type for block in none.content] == ["text"]
    assert none.stop_reason in ("end_turn", "max_tokens") and "<tool_call>" not in none.content[0].text
    whole = lambda m: m.usage.input_tokens + (m.usage.cache_read_input_tokens or 0)  # noqa: E731
    assert whole(none) == whole(auto) == counts["none"]
