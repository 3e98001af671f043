"""Constrained output is JSON a strict parser accepts, asked for many times with the official clients.

Schemas come from pydantic models (as ``instructor`` and the OpenAI SDK's ``parse`` build them) and
every reply that finished normally is read back with ``json.loads`` and with pydantic's own strict
JSON parser, which refuses a raw control character inside a string. Prompts vary (cities, names,
odd characters that invite a newline or a quote into a string) and half of them repeat, so both a
fresh prompt and one whose prefix is cached are decoded. Sampling is at temperature 0.8 with a seed per
request, so the replies really differ. A reply cut by the token limit must say ``length``.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import ollama
import openai
import pytest
from pydantic import BaseModel, ConfigDict

pytestmark = [pytest.mark.model, pytest.mark.timeout(1200)]  # 16-32 grammar-constrained replies each: a minute
TIMES = 16  # each ask and person at least twice, fresh and cached
PARALLEL = 4  # requests at once: the runner decodes them together, as a busy server would


class Weather(BaseModel):
    model_config = ConfigDict(extra="forbid")
    city: str


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    age: int


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                                 "parameters": Weather.model_json_schema()}}
ASKS = ["Weather in Paris?", "What is it like in Reykjavik today?", 'Weather in "Quote Town"?',
        "Weather in Rome\nor in\nMilan, on two lines", "Tab\tseparated city: Oslo", "Is it raining in Lima?",
        "Weather for São Paulo\\Brazil", "Weather in Tokyo, answer on two lines"]
PEOPLE = ["Invent a person.", "A pirate with a name on two lines.", 'Someone whose name has "quotes".',
          "A poet named\nNewline.", "A robot; its name holds a tab\tcharacter.", "Anyone at all."]
MAX_TOKENS = 28  # a call is about 18 tokens, a person about 16: most finish, some are cut (and must say so)


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


def _prompt(asks: list[str], i: int) -> str:
    return asks[i % len(asks)] if i % 2 else f"{asks[i % len(asks)]} (request {i})"  # odd: repeats, cached


def _many(fn, times: int = TIMES) -> list:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(fn, range(times)))


def test_forced_tool_calls_parse_and_validate_every_time(client):
    def one(i: int):
        r = client.chat.completions.create(
            model="starter", messages=[{"role": "user", "content": _prompt(ASKS, i)}], tools=[WEATHER_TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=MAX_TOKENS, temperature=0.8,
            seed=i)
        return r.choices[0]

    choices = _many(one)
    finished = [c for c in choices if c.finish_reason == "tool_calls"]
    for choice in finished:
        arguments = choice.message.tool_calls[0].function.arguments
        json.loads(arguments)
        Weather.model_validate_json(arguments, strict=True)
    assert all(c.finish_reason in ("tool_calls", "length") for c in choices)
    assert len(finished) >= TIMES // 2, [c.finish_reason for c in choices]  # most fit in MAX_TOKENS


def test_json_schema_replies_parse_and_validate_every_time(client):
    schema = {"name": "person", "strict": True, "schema": Person.model_json_schema()}

    def one(i: int):
        r = client.chat.completions.create(
            model="starter", messages=[{"role": "user", "content": _prompt(PEOPLE, i)}], max_tokens=MAX_TOKENS,
            temperature=0.8, seed=1000 + i, response_format={"type": "json_schema", "json_schema": schema})
        return r.choices[0]

    choices = _many(one)
    finished = [c for c in choices if c.finish_reason == "stop"]
    for choice in finished:
        json.loads(choice.message.content)
        Person.model_validate_json(choice.message.content, strict=True)
    assert all(c.finish_reason in ("stop", "length") for c in choices)
    assert len(finished) >= TIMES // 2, [c.finish_reason for c in choices]


def test_streamed_forced_calls_parse_too(client):
    def one(i: int):
        events = client.chat.completions.create(
            model="starter", messages=[{"role": "user", "content": _prompt(ASKS, i)}], tools=[WEATHER_TOOL],
            tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=MAX_TOKENS, temperature=0.8,
            seed=500 + i, stream=True)
        events = [e for e in events if e.choices]
        arguments = "".join(tc.function.arguments or "" for e in events for tc in e.choices[0].delta.tool_calls or [])
        return events[-1].choices[0].finish_reason, arguments

    for finish, arguments in _many(one, 12):
        if finish == "tool_calls":
            Weather.model_validate_json(arguments, strict=True)
        else:
            assert finish == "length"


def test_ollama_format_replies_parse_and_validate(base_url):
    client = ollama.Client(host=base_url, timeout=300)

    def one(i: int):
        r = client.chat(model="starter", messages=[{"role": "user", "content": _prompt(PEOPLE, i)}],
                        format=Person.model_json_schema(), options={"num_predict": MAX_TOKENS, "temperature": 0.8, "seed": i},
                        stream=False)
        return r.done_reason, r.message.content

    for done_reason, content in _many(one, 12):
        if done_reason == "stop":
            Person.model_validate_json(content, strict=True)
        else:
            assert done_reason == "length"


def test_a_forced_call_cut_by_the_token_limit_says_length(client):
    r = client.chat.completions.create(
        model="starter", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=[WEATHER_TOOL],
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=12, temperature=0)
    choice = r.choices[0]
    assert choice.finish_reason == "length"
    call = choice.message.tool_calls[0]  # named, with the fragment it had: OpenAI's shape for a cut call
    assert call.function.name == "get_weather"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.function.arguments)


def test_a_schema_reply_cut_by_the_token_limit_says_length(client):
    r = client.chat.completions.create(
        model="starter", messages=[{"role": "user", "content": "Invent a person."}], max_tokens=3, temperature=0,
        response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": Person.model_json_schema()}})
    assert r.choices[0].finish_reason == "length"
