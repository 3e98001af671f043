"""A Predicted Outputs ``prediction`` is bounded by the context, like the prompt (issue 42, case 4).

No reply is longer than the model's context, so no more of a prediction can ever be used: one past the
characters the context could hold is refused with a 400 before anything tokenizes it (a 5 MB prediction
was tokenized and indexed in the runner for 19.6 s, grew it 381 MB and stalled another client's stream
8.1 s), and one under that is used only up to the context's length. Over the real server and SmolLM2.
"""

from __future__ import annotations

import re
import time

import openai
import pytest

from tests.helpers.flowing import Stream

pytestmark = pytest.mark.model
WORDS = "lorem ipsum dolor sit amet "


def test_a_prediction_longer_than_the_context_is_a_400_and_stalls_no_stream(base_url, runtime):
    cap = runtime.prompt_cap("starter")
    prediction = (WORDS * (cap // len(WORDS) + 100))[:cap + 1000]
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=300)
    with Stream(base_url) as stream:
        start = time.monotonic()
        with pytest.raises(openai.BadRequestError) as caught:
            client.chat.completions.create(model="starter", max_tokens=4, messages=[{"role": "user", "content": "Hi"}],
                                           prediction={"type": "content", "content": prediction})
        end = time.monotonic()
    stream.assert_flowed(start, end)
    assert end - start < 5
    assert caught.value.body["code"] == "context_length_exceeded"
    assert re.search(rf"the prediction is {cap + 1000:,} characters, and a [\d,]+-token context holds at most "
                     rf"{cap:,} characters", caught.value.body["message"])


def test_a_prediction_under_the_cap_is_still_used(base_url):
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=300)
    text = "def add(a, b):\n    return a + b\n"
    reply = client.chat.completions.create(
        model="starter", max_tokens=24, temperature=0, prediction={"type": "content", "content": text * 400},
        messages=[{"role": "user", "content": f"Repeat this code exactly:\n{text}"}])
    details = reply.usage.completion_tokens_details
    assert details.accepted_prediction_tokens + details.rejected_prediction_tokens > 0
