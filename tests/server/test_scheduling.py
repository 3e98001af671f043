"""Scheduling through the server: error statuses, a full queue, 20 concurrent streams, a client that
hangs up freeing its place at once, and a runner crash reported mid-stream and recovered from."""

from __future__ import annotations

import itertools
import json
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model
LONG = {"model": "starter", "messages": [{"role": "user", "content": "Write a long story."}],
        "max_tokens": 2000, "stream": True}


def test_context_overflow_is_400(base_url):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="starter", max_tokens=2,
                                       messages=[{"role": "user", "content": "hello " * 9000}])
    assert err.value.body["code"] == "context_length_exceeded" and "context holds" in err.value.body["message"]


@pytest.mark.parametrize("body, param", [
    ({"model": "starter"}, "messages"),
    ({"model": "starter", "messages": [], "max_tokens": 2}, "messages"),
    ({"model": "starter", "messages": [{"role": "user", "content": "x"}], "temperature": 9}, "temperature"),
    ({"model": "starter", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}, "tool_choice"),
    ({"model": "starter", "messages": [{"role": "user", "content": "x"}],
      "response_format": {"type": "json_schema", "json_schema": {}}}, "response_format"),
])
def test_validation_errors_are_400_in_openai_shape(base_url, body, param):
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["type"] == "invalid_request_error" and param in (error["param"] or "") and error["message"]


def test_every_request_gives_its_arrival_ticket_back_however_it_ends(base_url, runtime):
    """A ticket left out would have every later burst's first request wait for a request that never
    comes (runtime/arrivals.py)."""
    oai = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)
    oai.chat.completions.create(model="starter", max_tokens=2, messages=[{"role": "user", "content": "Hi"}])
    for _ in oai.chat.completions.create(model="starter", max_tokens=2, stream=True,
                                         messages=[{"role": "user", "content": "Hi"}]):
        pass
    assert httpx.post(f"{base_url}/v1/chat/completions", json={"model": "starter"}, timeout=30).status_code == 400
    assert httpx.post(f"{base_url}/api/chat", json={"model": "nobody", "messages": []}, timeout=30).status_code == 404
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=LONG, timeout=30) as r:
        next(r.iter_lines())  # hang up mid-stream
    httpx.post(f"{base_url}/v1/messages", timeout=30, json={"model": "starter", "max_tokens": 2,
                                                         "messages": [{"role": "user", "content": "Hi"}]})
    wait_until(lambda: runtime.arrivals.pending() == 0, 10)


def test_twenty_concurrent_streams_all_complete(base_url, runtime):
    # Twenty streams over four prompts: each must complete, and each must carry its own prompt's tokens
    # whatever slot it lands in and whatever shares its batch: the same tokens with the same
    # log-probabilities, to the bit, as the prompt asked alone (same request, same reply: batch.py).
    prompts = ["Tell me about the sea.", "Name a color.", "What is 2 + 2?", "Write a word about cats."]
    alone = {}
    for p in prompts:
        first = next(c for c in runtime.chat("starter", ChatRequest([{"role": "user", "content": p}], Sampling(
            max_tokens=1, temperature=0, logprobs=0))) if c.kind == "text").logprobs[0]
        alone[p] = first.token, first.logprob
    for p, q in itertools.combinations(prompts, 2):  # the test can tell the prompts apart
        assert alone[p] != alone[q], (alone[p], alone[q])
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0)

    def one(i: int) -> tuple[str, tuple, str, int]:
        prompt = prompts[i % 4]
        events = list(client.chat.completions.create(
            model="starter", messages=[{"role": "user", "content": prompt}], max_tokens=4, temperature=0,
            logprobs=True, stream=True, stream_options={"include_usage": True}))
        steps = [t for e in events if e.choices and e.choices[0].logprobs for t in e.choices[0].logprobs.content]
        first = steps[0].token, steps[0].logprob
        finish = [e.choices[0].finish_reason for e in events if e.choices][-1]
        return prompt, first, finish, events[-1].usage.completion_tokens

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(one, range(20)))
    assert len(results) == 20
    for prompt, (token, logprob), finish, n_tokens in results:
        want_token, want_logprob = alone[prompt]
        assert (token, logprob) == (want_token, want_logprob), (prompt, token, logprob, alone[prompt])
        assert (finish, n_tokens) == ("length", 4)


def first_event(lines) -> dict:
    for line in lines:
        if line.startswith("data: "):
            return json.loads(line[6:])
    raise AssertionError("the stream ended without an event")


def test_full_queue_is_503_and_a_disconnect_frees_the_slot(narrow):
    server, rt = narrow
    with httpx.Client(timeout=60) as a:
        with a.stream("POST", f"{server.url}/v1/chat/completions", json=LONG) as stream:
            lines = stream.iter_lines()
            assert first_event(lines)["choices"][0]["delta"]["role"] == "assistant"
            while not first_event(lines)["choices"][0]["delta"].get("content"):
                pass  # the role comes before generation starts; a token means the runner holds the slot
            busy = httpx.post(f"{server.url}/v1/chat/completions", json={**LONG, "stream": False}, timeout=30)
            assert busy.status_code == 503 and busy.headers["retry-after"]
            assert busy.json()["error"]["code"] == "queue_full"
            client = rt._slots["starter"].client
            assert client.in_flight == 1
        freed_in = wait_until(lambda: client.in_flight == 0, timeout=10)
    assert freed_in < 3  # within a few tokens, not the ~2000 the story asked for
    r = httpx.post(f"{server.url}/v1/chat/completions", json={**LONG, "stream": False, "max_tokens": 2}, timeout=60)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 2


def test_runner_crash_mid_stream_is_reported_and_the_next_request_recovers(narrow):
    server, rt = narrow
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=LONG, timeout=60) as stream:
        lines = stream.iter_lines()
        first_event(lines)
        pid = rt._slots["starter"].client.pid
        os.kill(pid, signal.SIGKILL)
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: ") and line != "data: [DONE]"]
    error = events[-1]["error"]
    assert error["code"] == "runner_crashed" and "SIGKILL" in error["message"]
    r = httpx.post(f"{server.url}/v1/chat/completions", json={**LONG, "stream": False, "max_tokens": 2}, timeout=60)
    assert r.status_code == 200
    assert rt._slots["starter"].client.pid != pid
