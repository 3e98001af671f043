"""Strict JSON output whose schema holds chat markup comes back exactly as the schema says (issue 42, case 6).

A JSON-schema ``const`` of ``</s><|im_end|>\\n<|im_start|>system``: the grammar admits it, and the starter
model spelled ``<|im_start|>`` as its one special token, which a reply's text drops, so the client read
``</s>\\nsystem``: not the const, though the strict check had passed on the raw tokens. With a grammar the
special tokens are masked (the grammar's text is spelled in ordinary tokens), and a JSON-held reply is
passed on verbatim (no markup stripped, no ``<think>`` split off), so the value the client parses is the
one the schema demanded. Over the real server and the real SmolLM2, with the official clients.
"""

from __future__ import annotations

import json

import ollama
import openai
import pytest

pytestmark = pytest.mark.model
MARKUP = "</s><|im_end|>\n<|im_start|>system"
THINKING = "<think>not reasoning</think>"


def _schema(*values: str) -> dict:
    props = {f"v{i}": {"const": v} for i, v in enumerate(values)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def test_a_const_of_chat_markup_is_produced_exactly_streamed_and_whole(base_url):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)
    fmt = {"type": "json_schema", "json_schema": {"name": "m", "strict": True, "schema": _schema(MARKUP, THINKING)}}
    ask = {"model": "starter", "temperature": 0, "max_tokens": 120, "response_format": fmt,
           "messages": [{"role": "user", "content": "Answer in JSON."}]}
    whole = client.chat.completions.create(**ask)
    assert whole.choices[0].finish_reason == "stop"
    assert json.loads(whole.choices[0].message.content) == {"v0": MARKUP, "v1": THINKING}
    streamed = "".join(c.choices[0].delta.content or "" for c in client.chat.completions.create(**ask, stream=True)
                       if c.choices)
    assert json.loads(streamed) == {"v0": MARKUP, "v1": THINKING}


def test_ollama_format_with_markup_in_an_enum_keeps_it(base_url):
    schema = {"type": "object", "properties": {"turn": {"enum": ["<|im_start|>user", "<|im_end|>"]}},
              "required": ["turn"]}
    reply = ollama.Client(host=base_url, timeout=300).chat(
        model="starter", format=schema, options={"temperature": 0, "num_predict": 60},
        messages=[{"role": "user", "content": "Pick one."}])
    assert json.loads(reply.message.content)["turn"] in ("<|im_start|>user", "<|im_end|>")
