"""Schemas that used to kill or stall the shared runner, sent through the real clients to the real server.

Each is refused with a 400 that names its limit, and a stream another client has open on the same
model runs to its end, in the same runner process.
"""

from __future__ import annotations

import json
import threading
import time

import ollama
import openai
import pytest

pytestmark = pytest.mark.model

ASK = [{"role": "user", "content": "List some numbers."}]
SEGFAULT = {"type": "array", "items": {"type": "integer"}, "maxItems": 3000}  # 80 bytes; SIGSEGV before
HUGE = {"type": "array", "items": {"type": "integer"}, "maxItems": 10**7}     # a 210 MB grammar before
WIDE = {"enum": [f"v{i}" for i in range(100_000)]}                           # 106 s for 3 tokens before
DEAD_END = {"type": "object", "properties": {"c": {"type": "string", "pattern": "^[^ -\\U0010FFFF]$"}},
            "required": ["c"]}  # 150 bytes: a class strictjson empties; SIGABRT in the runner before


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=120)


def _schema_format(schema):
    return {"type": "json_schema", "json_schema": {"name": "numbers", "schema": schema}}


class _Stream(threading.Thread):
    """Another client's stream on the same model, read to its end."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client, self.text, self.finish, self.error, self.started = client, "", None, None, threading.Event()

    def run(self):
        try:
            for chunk in self.client.chat.completions.create(model="starter", messages=ASK, max_tokens=120,
                                                             seed=3, stream=True):
                if chunk.choices and chunk.choices[0].delta.content:
                    self.text += chunk.choices[0].delta.content
                    self.started.set()
                if chunk.choices and chunk.choices[0].finish_reason:
                    self.finish = chunk.choices[0].finish_reason
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            self.started.set()


def test_the_schema_that_crashed_the_runner_is_a_400_and_another_stream_survives(client, runtime):
    client.chat.completions.create(model="starter", messages=ASK, max_tokens=1)  # loaded
    pid = runtime.loaded()[0].pid
    other = _Stream(client)
    other.start()
    assert other.started.wait(120)
    with pytest.raises(openai.BadRequestError, match="maxItems") as refused:
        client.chat.completions.create(model="starter", messages=ASK, max_tokens=20,
                                       response_format=_schema_format(SEGFAULT))
    assert refused.value.status_code == 400
    other.join(180)
    assert other.error is None, f"the other client's stream broke: {other.error}"
    assert other.finish in ("length", "stop") and other.text
    assert runtime.loaded()[0].pid == pid


@pytest.mark.parametrize(("schema", "limit"), [(HUGE, "maxItems"), (WIDE, "enum")], ids=["maxItems-10**7", "enum-100k"])
def test_huge_schemas_are_refused_fast(client, schema, limit):
    started = time.perf_counter()
    with pytest.raises(openai.BadRequestError, match=limit):
        client.chat.completions.create(model="starter", messages=ASK, max_tokens=3,
                                       response_format=_schema_format(schema))
    assert time.perf_counter() - started < 10


def test_ollama_format_is_held_to_the_same_limits(base_url):
    with pytest.raises(ollama.ResponseError) as refused:
        ollama.Client(host=base_url).chat(model="starter", messages=ASK, format=SEGFAULT, options={"num_predict": 5})
    assert refused.value.status_code == 400 and "maxItems" in refused.value.error


def test_a_forced_tool_schema_is_held_to_the_same_limits(client):
    tool = {"type": "function", "function": {"name": "pick", "parameters": {
        "type": "object", "properties": {"choice": WIDE}, "required": ["choice"]}}}
    with pytest.raises(openai.BadRequestError, match="enum"):
        client.chat.completions.create(model="starter", messages=ASK, tools=[tool], tool_choice="required",
                                       max_tokens=10)


def test_a_schema_within_the_limits_still_constrains_the_reply(client):
    schema = {"type": "array", "items": {"type": "integer"}, "maxItems": 5}
    r = client.chat.completions.create(model="starter", messages=ASK, max_tokens=150, seed=1,
                                       response_format=_schema_format(schema))
    values = json.loads(r.choices[0].message.content)
    assert isinstance(values, list) and len(values) <= 5 and all(isinstance(v, int) for v in values)


def test_a_schema_within_every_limit_that_llama_cpp_refuses_is_a_400_not_a_dead_runner(client, runtime):
    """Found by the fuzzer: an escape llama.cpp's parser does not know (first a control character in a
    const, which strictjson.py now writes as its JSON escape; still a pattern's unknown regex escape);
    only the separate compile check stands between it and the shared runner."""
    client.chat.completions.create(model="starter", messages=ASK, max_tokens=1)
    pid = runtime.loaded()[0].pid
    schema = {"type": "object", "properties": {"mark": {"type": "string", "pattern": "^\\q$"}}, "required": ["mark"]}
    with pytest.raises(openai.BadRequestError, match="grammar"):
        client.chat.completions.create(model="starter", messages=ASK, max_tokens=5,
                                       response_format=_schema_format(schema))
    assert client.chat.completions.create(model="starter", messages=ASK, max_tokens=3).choices[0].message.content
    assert runtime.loaded()[0].pid == pid


def test_a_const_with_a_control_character_comes_back_as_that_string(client):
    schema = {"type": "object", "properties": {"mark": {"const": "\b"}}, "required": ["mark"]}
    r = client.chat.completions.create(model="starter", messages=ASK, max_tokens=64,  # room for the grammar's spaces
                                       response_format=_schema_format(schema))
    assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
    assert json.loads(r.choices[0].message.content) == {"mark": "\b"}


def test_the_dead_end_schema_is_a_400_naming_its_place_and_another_stream_survives(client, runtime):
    client.chat.completions.create(model="starter", messages=ASK, max_tokens=1)  # loaded
    pid = runtime.loaded()[0].pid
    other = _Stream(client)
    other.start()
    assert other.started.wait(120)
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="starter", messages=ASK, max_tokens=20, stream=True,
                                       response_format=_schema_format(DEAD_END))
    assert refused.value.status_code == 400
    assert "#/properties/c/pattern" in str(refused.value) and "matches no character" in str(refused.value)
    other.join(180)
    assert other.error is None, f"the other client's stream broke: {other.error}"
    assert other.finish in ("length", "stop") and other.text
    assert runtime.loaded()[0].pid == pid


@pytest.mark.parametrize("pattern", ["^a{6_00}$", "^a{ 600}$", "^a{600 }$", "^(a{1_000}){1_000}$"])
def test_every_spelling_of_a_repetition_is_capped_or_a_400(client, pattern):
    with pytest.raises(openai.BadRequestError, match="quantifier") as refused:
        client.chat.completions.create(model="starter", messages=ASK, max_tokens=3,
                                       response_format=_schema_format({"type": "string", "pattern": pattern}))
    assert refused.value.status_code == 400 and "#/pattern" in str(refused.value)
