"""Same request, same reply: a greedy or seeded request to ``fireside serve`` gets the same text and the
same log-probabilities, to the bit, however the work was split to make it.

Each case changes only how the reply is computed, never what was asked: the prompt evaluated cold or
from a cached prefix, or from a state saved on disk by a server since restarted; the machine quiet or
with busy processes taking the cores (so the runner's thread count moves, runner/threads.py);
the request alone or among three other streams; with and without a ``prediction`` and a draft model
(speculative decoding verifies guesses in batches). The prompt is long enough (600 tokens or more) that
every path llama.cpp's CPU attention can take is reached: on an f16 KV cache each of these cases moved
the logits (models/exactness.py, ``kv_for``). Log-probabilities are compared exactly: a changed path shows
there even where no near tie flips a word. The weights' side is checked on a Q4_K_M copy of the starter:
K-quant weights in a batch of 8 rows or more took a tiled kernel that rounds otherwise than a decoded
token's (and on AVX2 a repacked one at 4 rows), so a prediction's verification or another stream's prompt
in the same step moved the reply (``exactness.BATCH_VARIANT_TYPES``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.helpers.models import requantized, smollm2_file
from tests.helpers.serve import serve

pytestmark = pytest.mark.model

LONG = ("The harbour town keeps a logbook of every ship that came in since 1802: the name, the cargo, the "
        "weather, and who met it on the quay. ") * 20
QUESTION = "Write the next three entries of the logbook."
GREEDY = {"temperature": 0}
SEEDED = {"temperature": 0.9, "seed": 11}
OTHERS = ["Name three rivers in Europe.", "What is a prime number?", "Describe a lighthouse at night."]


def ask(url: str, sampling: dict, content: str = QUESTION, model: str = "starter", **extra) -> tuple[str, list, object]:
    """The reply's text, its tokens' log-probabilities (with two alternatives each), and its usage."""
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=240)
    r = client.chat.completions.create(
        model=model, max_tokens=40, logprobs=True, top_logprobs=2, **sampling, **extra,
        messages=[{"role": "system", "content": LONG}, {"role": "user", "content": content}])
    lp = [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs]) for t in r.choices[0].logprobs.content]
    return r.choices[0].message.content, lp, r.usage


@contextlib.contextmanager
def busy(n: int):
    """``n`` processes that take a core each until the block ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("same-reply")


@pytest.fixture(scope="module")
def first(home):
    """The reference replies (greedy and seeded), asked cold of a fresh server, which then serves the cases."""
    with serve(home, "--load", "starter", "--ctx", "2048", "--parallel", "4") as url:
        greedy, seeded = ask(url, GREEDY), ask(url, SEEDED)
        assert greedy[2].prompt_tokens > 600 and greedy[2].prompt_tokens_details.cached_tokens == 0
        yield url, {"greedy": greedy[:2], "seeded": seeded[:2]}


@pytest.mark.parametrize("kind", ["greedy", "seeded"])
def test_the_same_reply_from_a_cached_prefix_and_on_a_busy_machine(first, kind):
    url, want = first
    sampling = GREEDY if kind == "greedy" else SEEDED
    cached = ask(url, sampling)
    assert cached[2].prompt_tokens_details.cached_tokens > 600
    assert cached[:2] == want[kind]
    with busy(2):  # the runner's threads now fight two processes for two cores: it takes fewer
        assert ask(url, sampling)[:2] == want[kind]
        assert ask(url, sampling)[:2] == want[kind]


def test_the_same_reply_among_three_other_streams(first):
    url, want = first
    with ThreadPoolExecutor(4) as pool:
        others = [pool.submit(ask, url, GREEDY, text) for text in OTHERS]
        mine = pool.submit(ask, url, GREEDY)
        assert mine.result()[:2] == want["greedy"]
        assert all(o.result()[0] for o in others)


def test_the_same_reply_with_a_prediction(first):
    url, want = first
    text = want["greedy"][0]
    guess = text[: len(text) // 2] + " and then something else entirely."  # half right, then wrong
    reply = ask(url, GREEDY, prediction={"type": "content", "content": guess})
    assert reply[:2] == want["greedy"]
    assert reply[2].completion_tokens_details.accepted_prediction_tokens > 0


def test_the_same_reply_after_a_restart_from_disk_with_a_draft_model(first, home):
    _, want = first
    with serve(home, "--load", "starter", "--ctx", "2048", "--parallel", "4", "--draft", "starter") as url:
        greedy = ask(url, GREEDY)
        assert greedy[2].prompt_tokens_details.cached_tokens > 600  # restored from the state saved on disk
        assert greedy[:2] == want["greedy"]
        assert ask(url, SEEDED)[:2] == want["seeded"]


def test_the_same_reply_from_k_quant_weights_with_a_prediction_and_among_other_streams(tmp_path_factory):
    home = tmp_path_factory.mktemp("same-reply-k-quant")
    model = requantized(smollm2_file(), home / "starter-Q4_K_M.gguf", "Q4_K_M")
    subprocess.run([sys.executable, "-m", "fireside.engine", "import", str(model)], check=True,
                   env={**os.environ, "FIRESIDE_HOME": str(home)}, capture_output=True)
    with serve(home, "--ctx", "2048", "--parallel", "4") as url:
        name = next(m.id for m in openai.OpenAI(base_url=f"{url}/v1", api_key="x").models.list() if "Q4_K_M" in m.id)
        want = ask(url, GREEDY, model=name)
        text = want[0]
        predicted = ask(url, GREEDY, model=name, prediction={"type": "content", "content": text})  # 16 a batch
        assert predicted[:2] == want[:2]
        assert predicted[2].completion_tokens_details.accepted_prediction_tokens > 8
        with ThreadPoolExecutor(4) as pool:  # their prompts evaluated in the steps that decode this reply
            mine = pool.submit(ask, url, GREEDY, model=name)
            others = [pool.submit(ask, url, GREEDY, text, model=name) for text in OTHERS]
            assert mine.result()[:2] == want[:2]
            assert all(o.result()[0] for o in others)
