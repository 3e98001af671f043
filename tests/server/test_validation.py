"""Every bad field is a 400 naming the field, in the caller's dialect, before anything reaches a model.

Each case here was a 500 with a traceback, or reached the runner, before the dialects had one
validation layer (issue 17, item 6). None of them loads the model: validation answers first.
"""

from __future__ import annotations

import anthropic
import httpx
import ollama
import openai
import pytest

HI = [{"role": "user", "content": "hi"}]


def post_raw(base_url: str, path: str, body: str) -> httpx.Response:
    """A body sent as written: NaN and escaped lone surrogates are JSON no client library sends."""
    return httpx.post(f"{base_url}{path}", content=body.encode("ascii"), timeout=30,
                      headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(("options", "field"), [
    ({"num_predict": "abc"}, "options.num_predict"),
    ({"stop": 123}, "options.stop"),
    ({"temperature": "abc"}, "options.temperature"),
    ({"top_k": 10**12}, "options.top_k"),
    ({"seed": -5}, "options.seed"),
])
def test_ollama_bad_options_are_400_naming_the_field(base_url, options, field):
    r = httpx.post(f"{base_url}/api/chat", json={"model": "starter", "messages": HI, "options": options}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["error"].startswith(field)  # Ollama's shape: {"error": "..."}


def test_ollama_client_sees_a_400(base_url):
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(host=base_url).chat(model="starter", messages=HI, options={"temperature": "abc"})
    assert err.value.status_code == 400 and "temperature" in err.value.error


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/api/chat", '{"model": "starter", "messages": [{"role": "user", "content": "hi"}], '
                  '"options": {"temperature": NaN}}', "options.temperature"),
    ("/api/generate", '{"model": "starter", "prompt": "hi", "options": {"top_p": Infinity}}', "options.top_p"),
    ("/api/chat", '{"model": "starter", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
     "messages.0.content"),
    ("/api/chat", '{"model": "starter", "keep_alive": 1e999}', "keep_alive"),
    ("/v1/chat/completions", '{"model": "starter", "messages": [{"role": "user", "content": "hi"}], '
                             '"temperature": -Infinity}', "temperature"),
    ("/v1/messages", '{"model": "starter", "max_tokens": 5, "messages": [{"role": "user", '
                     '"content": [{"type": "text", "text": "\\udfff"}]}]}', "messages.0.content.0.text"),
])
def test_non_finite_numbers_and_lone_surrogates_are_400(base_url, path, body, field):
    r = post_raw(base_url, path, body)
    assert r.status_code == 400, r.text
    assert field in r.text


def test_nesting_past_the_limit_is_400_not_a_recursion_error(base_url):
    deep = '{"model": "starter", "messages": [{"role": "user", "content": "hi"}], "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert post_raw(base_url, "/v1/chat/completions", deep).status_code == 400


@pytest.mark.parametrize(("extra", "field"), [
    ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages.0.role"),
    ({"messages": [{"role": "assistant", "content": None, "tool_calls": "x"}]}, "messages.0.tool_calls"),
    ({"tools": [{"type": "function", "function": "get_time"}]}, "tools.0.function"),
    ({"tool_choice": 5}, "tool_choice"),
    ({"stop": 123}, "stop"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"seed": 2**40}, "seed"),
    ({"response_format": {"type": "xml"}}, "response_format.type"),
])
def test_openai_bad_fields_are_400_naming_the_field(base_url, extra, field):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    body = {"messages": HI, **extra}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="starter", **body)
    assert err.value.body["param"] == field and field in err.value.body["message"]


@pytest.mark.parametrize(("extra", "field"), [
    ({"max_tokens": "abc"}, "max_tokens"),
    ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]}]},
     "messages.0.content.0.tool_use.name"),
    ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]},
     "messages.0.content.0.tool_result.content"),
    ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "messages.0.content.0.text.text"),
    ({"messages": [{"role": "user", "content": [{"type": 5}]}]}, "messages.0.content.0.other.type"),
    ({"tool_choice": {"type": "bogus"}}, "tool_choice.type"),
    ({"tools": [{"description": "no name"}]}, "tools.0.name"),
    ({"top_k": -1}, "top_k"),
])
def test_anthropic_bad_fields_are_400_naming_the_field(base_url, extra, field):
    body = {"model": "starter", "max_tokens": 5, "messages": HI, **extra}
    r = httpx.post(f"{base_url}/v1/messages", json=body, timeout=30)  # the SDK itself chokes on some of these
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"].startswith(field)


def test_anthropic_client_sees_a_400(base_url):
    client = anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as err:  # was a KeyError and a 500
        client.messages.create(model="starter", max_tokens=5,
                               messages=[{"role": "assistant", "content": [{"type": "tool_use", "id": "t1"}]}])
    assert "name" in err.value.body["error"]["message"]


@pytest.mark.parametrize(("extra", "field"), [
    ({"input": [{"type": "function_call", "call_id": "c1"}]}, "input"),
    ({"input": [{"type": "message", "role": "user", "content": {"text": "hi"}}]}, "input.0.content"),
    ({"tools": [{"type": "function"}]}, "tools"),
    ({"text": {"format": {"type": "yaml"}}}, "text.format.type"),
])
def test_responses_bad_fields_are_400(base_url, extra, field):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model="starter", **{"input": "hi", **extra})
    assert field in err.value.body["message"]
