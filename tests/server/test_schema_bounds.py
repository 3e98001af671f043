"""Numeric bounds in a JSON schema hold in every dialect, asked the way client authors asked (issue 27).

The conformance round asked for "12, 45 and 78, and the year 3500" under a schema allowing digits 0-9
and a year 1900-2100, and for ``p`` 42.5 and ``n`` 7 under ``p`` in [0, 1] and ``n`` > 100; every
dialect answered the out-of-range values with finish ``stop``. Here the same requests go through the
official ``openai``, ``ollama`` and ``anthropic`` clients (an Anthropic forced tool), greedy, and each
reply must be in range and match the schema by ``jsonschema``. A keyword no grammar keeps is a 400
naming it, and a reply that breaks a keyword the grammar keeps only partly is an error, not ``stop``.
"""

from __future__ import annotations

import json
import re

import anthropic
import jsonschema
import ollama
import openai
import pytest

pytestmark = pytest.mark.model

DIGITS_YEAR = {"type": "object", "properties": {
    "digits": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}},
    "year": {"type": "integer", "minimum": 1900, "maximum": 2100}}, "required": ["digits", "year"],
    "additionalProperties": False}
P_N = {"type": "object", "properties": {
    "p": {"type": "number", "minimum": 0, "maximum": 1},
    "n": {"type": "integer", "exclusiveMinimum": 100}}, "required": ["p", "n"], "additionalProperties": False}
CASES = [(DIGITS_YEAR, 'Reply in JSON: the digits are 12, 45 and 78, and the year 3500.'),
         (P_N, 'Reply in JSON with "p": 42.5 and "n": 7.')]
# every number a reply of each case may hold (a digit or a year; p or n)
FITS = {id(DIGITS_YEAR): lambda x: 0 <= x <= 9 or 1900 <= x <= 2100, id(P_N): lambda x: 0 <= x <= 1 or x > 100}
MAX_TOKENS = 60


def _in_range(schema: dict, text: str, finish: str) -> None:
    """A finished reply matches the schema. The digits array has no maxItems, and greedy decoding may
    list digits until ``max_tokens`` (a near tie that the thread count in use can flip, under load):
    such a cut reply must have kept every bound in what it wrote."""
    if finish == "length":
        numbers = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", text)]
        assert numbers and all(FITS[id(schema)](x) for x in numbers), text
        return
    assert finish == "stop", (finish, text)
    jsonschema.validate(json.loads(text), schema)  # raises, naming the bound, if the reply broke one


def _openai_choice(base_url: str, schema: dict, ask: str):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    reply = client.chat.completions.create(
        model="starter", messages=[{"role": "user", "content": ask}], temperature=0, max_tokens=MAX_TOKENS,
        response_format={"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}})
    return reply.choices[0]


@pytest.mark.parametrize("schema,ask", CASES, ids=["digits-year", "p-n"])
def test_openai_response_format_keeps_the_bounds(base_url, schema, ask):
    choice = _openai_choice(base_url, schema, ask)
    _in_range(schema, choice.message.content, choice.finish_reason)


@pytest.mark.parametrize("schema,ask", CASES, ids=["digits-year", "p-n"])
def test_ollama_format_keeps_the_bounds(base_url, schema, ask):
    client = ollama.Client(host=base_url, timeout=300)
    reply = client.chat(model="starter", messages=[{"role": "user", "content": ask}], format=schema,
                        options={"temperature": 0, "num_predict": MAX_TOKENS})
    _in_range(schema, reply.message.content, reply.done_reason)


def test_a_bounded_array_closes_and_the_year_after_it_keeps_its_bounds_too(base_url):
    """The digits case with maxItems: the array must close, so the year is written, and in range."""
    schema = {**DIGITS_YEAR, "properties": {**DIGITS_YEAR["properties"], "digits": {
        **DIGITS_YEAR["properties"]["digits"], "maxItems": 6}}}
    choice = _openai_choice(base_url, schema, CASES[0][1])
    assert choice.finish_reason == "stop", choice
    jsonschema.validate(json.loads(choice.message.content), schema)


@pytest.mark.parametrize("schema,ask", CASES, ids=["digits-year", "p-n"])
def test_anthropic_forced_tool_keeps_the_bounds(base_url, schema, ask):
    client = anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
    reply = client.messages.create(
        model="starter", max_tokens=MAX_TOKENS, messages=[{"role": "user", "content": ask}],
        tools=[{"name": "answer", "description": "Give the answer", "input_schema": schema}],
        tool_choice={"type": "tool", "name": "answer"}, extra_body={"temperature": 0})  # greedy, as the others
    assert reply.stop_reason == "tool_use", reply
    call = next(block for block in reply.content if block.type == "tool_use")
    jsonschema.validate(call.input, schema)


def test_a_keyword_no_grammar_keeps_is_a_400_naming_it(base_url):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    schema = {"type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}, "required": ["a"]}
    with pytest.raises(openai.BadRequestError, match=r"#/a/not.*'not' keyword"):
        client.chat.completions.create(
            model="starter", messages=[{"role": "user", "content": "Hi"}], max_tokens=5,
            response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}})


def test_a_reply_that_breaks_a_partly_kept_keyword_is_an_error_not_stop(base_url):
    """uniqueItems is beyond a grammar: three equal items, forced by minItems and a const, are refused
    after generation with an error naming the keyword (the old code answered [1, 1, 1] with stop)."""
    client = ollama.Client(host=base_url, timeout=300)
    schema = {"type": "array", "items": {"const": 1}, "minItems": 3, "maxItems": 3, "uniqueItems": True}
    with pytest.raises(ollama.ResponseError, match="uniqueItems"):
        client.chat(model="starter", messages=[{"role": "user", "content": "Three ones."}], format=schema,
                    options={"temperature": 0, "num_predict": 20})
