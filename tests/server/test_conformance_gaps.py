"""The conformance matrix's former "Known gaps", each through the official client of its dialect against
the real server and SmolLM2: Ollama's sampling options (Mirostat, typical-p, the penalties' window
and the rest), the Responses API's ``parallel_tool_calls``, ``max_tool_calls``, ``truncation`` and
``include`` (log-probabilities on ``output_text``), and log-probabilities and stop sequences through
a remote engine."""

from __future__ import annotations

import ollama
import pytest

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Say hello."}]
STORY = [{"role": "user", "content": "Write a short story about a dragon."}]
HOT = {"temperature": 1.5, "num_predict": 16}  # varied enough that three seeds give three replies


@pytest.fixture(scope="module")
def oll(base_url):
    return ollama.Client(host=base_url, timeout=300)


def _text(oll, messages=STORY, **options) -> str:
    return oll.chat(model="starter", messages=messages, options=options, stream=False).message.content


# --- Ollama options --------------------------------------------------------------------------------------
def _seeded(oll, **options) -> set[str]:
    return {_text(oll, **HOT, **options, seed=seed) for seed in (1, 2, 3)}


@pytest.fixture(scope="module")
def greedy_story(oll) -> str:
    return _text(oll, temperature=0, num_predict=16)


def test_hot_sampling_varies_with_the_seed(oll):
    """The baseline the truncating options below are measured against: without them, three seeds at
    temperature 1.5 give three different replies."""
    assert len(_seeded(oll)) == 3


@pytest.mark.parametrize("options", [
    {"mirostat": 2, "mirostat_tau": 0.001},  # v2 keeps the tokens whose surprise is under mu = 2 tau: only the top one
    {"min_p": 1.0},  # only tokens as likely as the most likely one
    {"top_k": 1},
], ids=["mirostat_v2", "min_p", "top_k"])
def test_options_that_keep_only_the_top_token_sample_the_greedy_reply(oll, greedy_story, options):
    assert _seeded(oll, **options) == {greedy_story}


def test_typical_p_keeps_one_token_a_step(oll):
    """typical_p near 0 keeps the one token whose surprise is nearest the entropy (not always the most
    likely one): any seed then gives one and the same reply."""
    assert len(_seeded(oll, typical_p=0.0001)) == 1


def test_mirostat_v1_samples_with_its_own_target(oll):
    """Mirostat replaces top-k, top-p and min-p: with top_k 1 alone the reply is greedy, but with
    mirostat 1 and a high target surprise the same seeds sample varied text again."""
    assert len(_seeded(oll, top_k=1, mirostat=1, mirostat_tau=10.0)) > 1


def test_repeat_last_n_sets_the_window_the_penalties_see(oll):
    la = [{"role": "user", "content": "Repeat after me: la la la la la la"}]
    plain = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0)
    penalized = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0)
    assert penalized != plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0, repeat_last_n=0) == plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0, repeat_last_n=-1) == penalized


def test_seed_num_predict_and_stop_are_honoured(oll):
    a = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7}, stream=False)
    b = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7}, stream=False)
    assert a.message.content == b.message.content and a.eval_count == 16 and a.done_reason == "length"
    word = next(w for w in a.message.content.split()[1:] if len(w) > 2)
    cut = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7, "stop": [word]}, stream=False)
    assert cut.message.content == a.message.content[:a.message.content.index(word)] and cut.done_reason == "stop"


def test_presence_and_frequency_penalties_change_the_reply(oll):
    la = [{"role": "user", "content": "Repeat after me: la la la la la la"}]
    plain = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0)
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0, presence_penalty=2.0) != plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0, frequency_penalty=2.0) != plain


@pytest.mark.parametrize("options,field", [
    ({"mirostat": 3}, "mirostat"), ({"mirostat_tau": "high"}, "mirostat_tau"), ({"mirostat_eta": -1}, "mirostat_eta"),
    ({"typical_p": 2}, "typical_p"), ({"repeat_last_n": -2}, "repeat_last_n"),
])
def test_bad_sampling_options_are_a_400_naming_them(oll, options, field):
    with pytest.raises(ollama.ResponseError) as refused:
        oll.chat(model="starter", messages=HI, options=options, stream=False)
    assert refused.value.status_code == 400 and field in str(refused.value)
