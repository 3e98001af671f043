"""A huge prompt costs the other clients of its model nothing, and its sender gets a clear 400.

Over the real server and the real SmolLM2: one client streams a long reply while another sends a
prompt too long for the context. A prompt past the size cap (``runner/tokens.py``: more characters
than the context could hold) is refused before anything tokenizes it; a long prompt under the cap is
tokenized on the runner's tokenizer thread, so the stream's tokens keep coming.
"""

from __future__ import annotations

import re
import time

import anthropic
import httpx
import openai
import pytest

from tests.helpers.flowing import Stream

pytestmark = pytest.mark.model
WORDS = "lorem ipsum dolor sit amet "  # about 1.4 characters a token for SmolLM2: many tokens for its size


def _overflow_while_streaming(base_url: str, content: str) -> tuple[openai.BadRequestError, Stream, float, float]:
    stream = Stream(base_url)
    stream.start()
    assert stream.started.wait(120)
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)
    start = time.monotonic()
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="starter", max_tokens=2, messages=[{"role": "user", "content": content}])
    end = time.monotonic()
    stream.stop.set()
    stream.join(120)
    return err.value, stream, start, end


def test_a_4_mb_prompt_is_a_400_and_stalls_no_other_stream(base_url):
    content = (WORDS * (4_000_000 // len(WORDS) + 1))[:4_000_000]
    err, stream, start, end = _overflow_while_streaming(base_url, content)
    stream.assert_flowed(start, end)
    assert err.body["code"] == "context_length_exceeded"
    assert re.search(r"the prompt is 4,000,\d{3} characters", err.body["message"])  # refused untokenized


def test_a_long_prompt_under_the_cap_is_tokenized_without_stalling_other_streams(base_url, runtime):
    cap = runtime.prompt_cap("starter")
    content = (WORDS * (cap // len(WORDS)))[:cap - 1000]  # under the cap (the template adds ~60), far over n_ctx
    err, stream, start, end = _overflow_while_streaming(base_url, content)
    assert err.body["code"] == "context_length_exceeded" and "tokens" in err.body["message"]
    stream.assert_flowed(start, end)


def test_count_tokens_and_embeddings_refuse_a_prompt_past_the_cap(base_url, runtime):
    huge = "x" * (runtime.prompt_cap("starter") + 1)
    claude = anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as err:
        claude.messages.count_tokens(model="starter", messages=[{"role": "user", "content": huge}])
    assert "characters" in str(err.value)
    r = httpx.post(f"{base_url}/v1/embeddings", json={"model": "starter", "input": ["hi", huge]}, timeout=120)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"


def test_responses_truncation_drops_an_old_turn_past_the_cap(base_url, runtime):
    # the binary search counts prompts with the huge turn in: each is refused by its length, untokenized,
    # and counts as not fitting (not as a 400 for the whole request)
    huge = WORDS * (runtime.prompt_cap("starter") // len(WORDS) + 10)
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=300)
    reply = client.responses.create(model="starter", truncation="auto", max_output_tokens=2, input=[
        {"role": "user", "content": huge}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Say hi."}])
    assert reply.status in ("completed", "incomplete") and reply.usage.input_tokens < 100
