"""A reply cut by an unload says it was cut, in every dialect; a refused delete changes nothing.

Before: ``DELETE /api/delete`` of the starter answered 400 but unloaded it first, and the stream it
cut ended with ``finish_reason: "stop"`` as if the model had finished (issue 17, item 6).
"""

from __future__ import annotations

import json
import threading

import anthropic
import httpx
import ollama
import openai
import pytest

from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model
LONG = [{"role": "user", "content": "Count from one to two hundred, one number per line."}]
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"  # a greedy completion goes on counting: no early end


@pytest.fixture
def loaded(narrow):
    server, rt = narrow
    rt.load("starter")
    return server, rt


def _streamed(url: str, during=None) -> tuple[str, str]:
    """(text, finish reason) of a greedy streamed completion; ``during()`` runs after its second event."""
    body = {"model": "starter", "prompt": COUNTING, "max_tokens": 60, "stream": True, "temperature": 0}
    events = []
    with httpx.stream("POST", f"{url}/v1/completions", json=body, timeout=120) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                events.append(json.loads(line[6:]))
                if during and len(events) == 2:
                    during()
    text = "".join(e["choices"][0]["text"] for e in events if e["choices"])
    assert not [e for e in events if "error" in e]
    return text, [e["choices"][0]["finish_reason"] for e in events if e["choices"]][-1]


def test_refused_delete_leaves_the_model_and_its_stream_alone(loaded):
    server, rt = loaded
    whole = _streamed(server.url)
    refused = []
    cut = _streamed(server.url, lambda: refused.append(
        httpx.request("DELETE", f"{server.url}/api/delete", json={"model": "starter"}, timeout=30)))
    assert refused[0].status_code == 400 and "starter" in refused[0].json()["error"]
    assert rt.is_loaded("starter")
    assert cut == whole and whole[1] == "length"  # the same greedy reply, to the same end


def _unload_soon(rt, delay: float = 0.0) -> threading.Thread:
    t = threading.Timer(delay, rt.unload, args=("starter",))
    t.start()
    return t


def test_openai_stream_cut_by_an_unload_is_an_error(loaded):
    server, rt = loaded
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(model="starter", messages=LONG, max_tokens=300, stream=True)
    finishes = []
    with pytest.raises(openai.APIError, match="cut short|runner"):
        for i, chunk in enumerate(stream):
            if i == 1:
                _unload_soon(rt).join()
            finishes += [c.finish_reason for c in chunk.choices if c.finish_reason]
    assert "stop" not in finishes


def test_ollama_stream_cut_by_an_unload_is_an_error(loaded):
    server, rt = loaded
    parts = []
    with pytest.raises(ollama.ResponseError, match="cut short|runner"):
        for i, part in enumerate(ollama.Client(host=server.url).chat(
                model="starter", messages=LONG, options={"num_predict": 300}, stream=True)):
            parts.append(part)
            if i == 1:
                _unload_soon(rt).join()
    assert not any(p.done for p in parts)


def test_anthropic_stream_cut_by_an_unload_is_an_error(loaded):
    server, rt = loaded
    client = anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0)
    stops = []
    with pytest.raises(anthropic.APIError, match="cut short|runner"):
        with client.messages.stream(model="starter", max_tokens=300, messages=LONG) as stream:
            for i, event in enumerate(stream):
                if i == 3:
                    _unload_soon(rt).join()
                if event.type == "message_delta":
                    stops.append(event.delta.stop_reason)
    assert stops == []


def test_whole_reply_cut_by_an_unload_is_503(loaded):
    server, rt = loaded
    body = {"model": "starter", "prompt": COUNTING, "max_tokens": 400, "temperature": 0}
    warm = httpx.post(f"{server.url}/v1/completions", json={**body, "max_tokens": 1}, timeout=120)
    assert warm.status_code == 200  # a fresh runner's first decode is slow; the prompt is cached after
    answer = []
    # Unload once the request is in the runner's hands (peeking at the runtime's slot: nothing public
    # says so). Sent after the runner was told to shut down, it would never be read: a runner_crashed.
    client = rt._slots["starter"].client
    held = max(client.request("stats")["slots"])  # the warm-up's tokens, still in its slot
    waiter = threading.Thread(target=lambda: answer.append(
        httpx.post(f"{server.url}/v1/completions", json=body, timeout=120)))
    waiter.start()
    wait_until(lambda: client.in_flight or not waiter.is_alive(), 60)
    # decoding by now (a slot holds tokens past the warm-up's), so it stops within a token once told to
    wait_until(lambda: not waiter.is_alive() or max(client.request("stats")["slots"]) >= held + 3, 60)
    rt.unload("starter")
    waiter.join()
    r = answer[0]
    assert r.status_code == 503 and r.json()["error"]["code"] == "reply_cut", r.text
