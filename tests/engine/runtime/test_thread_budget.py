"""One thread budget for every runner (issue 28): two real runners (the starter model loaded under two
ids) share the machine's cores while both decode, a lone one gets them all back, and a user's
``--threads N`` stays N whatever the budget or the measurements say."""

from __future__ import annotations

import pytest

from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.runtime.threadbudget import shares
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

LONG = "Count from 1 to 300, separated by commas."


def ask(text: str, max_tokens: int) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}],
                       sampling=Sampling(max_tokens=max_tokens, temperature=0, repeat_penalty=1.0))


def loaded(rt: Runtime, model_id: str):
    return next(m for m in rt.loaded() if m.model_id == model_id)


def test_shares_split_the_cores_between_the_models_decoding():
    assert shares(2, [None]) == [2]
    assert shares(2, [None, None]) == [1, 1]
    assert shares(8, [None, None, None]) == [3, 3, 2]
    assert shares(2, [None, None, None]) == [1, 1, 1]  # never none: a model decoding gets a thread
    assert shares(8, [4, None, None]) == [4, 2, 2]  # a user's --threads 4 is kept; the rest share the others


@pytest.fixture(scope="module")
def two(tmp_path_factory, smollm2_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("budget"))})
    rt = Runtime(settings, resolver=lambda ref: smollm2_path, idle_ttl_s=0)
    rt.load("first", LoadOptions(context=1024, parallel=1))
    rt.load("second", LoadOptions(context=1024, parallel=1))
    yield rt
    rt.close()


@pytest.mark.model
def test_two_models_decoding_at_once_share_the_cores_and_a_lone_one_gets_them_back(two):
    cores = hardware.detect().cpu_cores
    list(two.chat("second", ask("Say hi.", 4)))
    alone = loaded(two, "second")
    assert alone.thread_share == cores and 1 <= alone.threads <= cores
    assert not alone.threads_fixed

    stream = two.chat("first", ask(LONG, 300))
    assert next(c for c in stream if c.kind == "text")  # the first model is decoding now
    during = []  # both decode now: what is the first one using? (a new share is taken at its next step, so
    for chunk in two.chat("second", ask("Say hello to the moon.", 8)):  # a sample just after may predate it)
        if chunk.kind == "text":
            during.append(two._slots["first"].client.request("stats")["threads"])
    both = loaded(two, "second")
    half = max(1, cores // 2)
    assert both.thread_share == half and both.threads <= half
    assert during and all(d["share"] == half for d in during), during
    assert any(d["decode"] <= half for d in during), during
    after = two._slots["first"].client.request("stats")["threads"]
    stream.close()
    assert after["share"] == cores  # the second one is done: the first has every core again


@pytest.mark.model
def test_a_users_thread_count_is_kept_fixed(two, smollm2_path):
    cores = hardware.detect().cpu_cores
    two.load("fixed", LoadOptions(context=1024, parallel=1, threads=cores))
    try:
        assert loaded(two, "fixed").threads == cores and loaded(two, "fixed").threads_fixed
        stream = two.chat("first", ask(LONG, 200))  # another model decoding does not take its threads
        assert next(c for c in stream if c.kind == "text")
        chunks = list(two.chat("fixed", ask(LONG, 16)))  # long enough for a controller to have probed
        stream.close()
        fixed = loaded(two, "fixed")
        assert chunks[-1].usage.completion_tokens == 16
        assert (fixed.threads, fixed.prompt_threads, fixed.threads_fixed) == (cores, cores, True)
        assert fixed.threads_label() == f"{cores} thread{'s' if cores > 1 else ''} (fixed)"
    finally:
        two.unload("fixed")
