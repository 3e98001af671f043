"""The long-chat lane (engine/runner/lanes.py) on the real SmolLM2: where the attention calibration's
figures say plain f16 attention decodes faster from some depth, sampled replies past it decode in a
second context with that attention, their history brought over converted instead of evaluated again,
while greedy and seeded replies stay in the exact context and come out as they would with no lane."""

from __future__ import annotations

import numpy as np
import pytest

from fireside.engine.library.starter import starter_path
from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.runner import kvstate, lanes
from fireside.engine.runner.kvstreams import sequences
from fireside.engine.runtime import attention
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model
OPTIONS = LoadOptions(context=2048, parallel=2, threads=2)
# as measured on a CPU where plain f16 attention falls behind less with depth: a lane from 256 tokens
FIGURES = {"q8_0+fa": {"0": 90.0, "1024": 30.0}, "f16+fa": {"0": 85.0, "1024": 20.0}, "f16": {"0": 88.0, "1024": 60.0}}
HISTORY = [{"role": "system", "content": "You are a museum guide. Answer briefly."},
           {"role": "user", "content": "Here are the visitor notes for today: " + " ".join(
               f"visitor {i} asked about the {['lamp', 'kitchen', 'storm', 'logbook'][i % 4]} room" for i in range(60))},
           {"role": "assistant", "content": "Noted."}]
QUESTION = {"role": "user", "content": "Which room did visitor 7 ask about?"}


def runtime(home, figures: dict | None) -> Runtime:
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    if figures is not None:
        key = attention.model_key(hardware.detect(), inspect_file(starter_path()), OPTIONS.threads)
        attention.Choices(settings.data_dir / "attention.json").remember(key, figures, "starter")
    rt = Runtime(settings, idle_ttl_s=0, calibrate=False)
    rt.load("starter", OPTIONS)
    return rt


@pytest.fixture(scope="module")
def laned(tmp_path_factory):
    rt = runtime(tmp_path_factory.mktemp("lane"), FIGURES)
    yield rt
    rt.close()


def ask(rt: Runtime, messages: list[dict], sampling: Sampling) -> tuple[str, object, list]:
    chunks = list(rt.chat("starter", ChatRequest(messages, sampling)))
    errors = [c for c in chunks if c.kind == "error"]
    assert not errors, errors
    usage = [c.usage for c in chunks if c.usage is not None][-1]
    logprobs = [c.logprob.logprob for c in chunks if getattr(c, "logprob", None) is not None]
    return "".join(c.text for c in chunks if c.kind == "text"), usage, logprobs


def stats(rt: Runtime) -> dict:
    return rt._slots["starter"].client.request("stats")


def test_the_load_says_which_replies_take_which_attention(laned):
    [note] = [n for n in laned.loaded()[0].notes if n.startswith("attention:")]
    assert "q8_0+fa for greedy and seeded replies, f16 for sampled ones from 256 tokens of history" in note


def test_a_sampled_turn_past_the_depth_decodes_in_the_lane_with_its_history_brought(laned):
    first, used, _ = ask(laned, [*HISTORY, QUESTION], Sampling(temperature=0, max_tokens=8))
    assert used.prompt_tokens > 256 and not any(stats(laned)["lane_slots"])  # greedy: the exact context
    follow = [*HISTORY, QUESTION, {"role": "assistant", "content": first}, {"role": "user", "content": "And visitor 9?"}]
    text, usage, _ = ask(laned, follow, Sampling(temperature=0.7, max_tokens=16))
    assert text.strip()
    # the history came over converted, not evaluated again: all of the first turn's prompt counts as cached
    assert usage.cached_tokens >= used.prompt_tokens
    assert max(stats(laned)["lane_slots"]) >= usage.prompt_tokens
    # the next greedy turn goes back to the exact context, which still holds the history up to its first turn
    _, again, _ = ask(laned, [*follow, {"role": "assistant", "content": text}, QUESTION], Sampling(temperature=0, max_tokens=4))
    assert again.cached_tokens >= used.prompt_tokens


def test_a_short_sampled_chat_and_a_seeded_one_stay_in_the_exact_context(laned):
    before = stats(laned)["lane_slots"]
    ask(laned, [{"role": "user", "content": "Hi there"}], Sampling(temperature=0.7, max_tokens=4))
    ask(laned, [*HISTORY, QUESTION], Sampling(temperature=0.7, seed=5, max_tokens=4))
    assert stats(laned)["lane_slots"] == before


def test_greedy_and_seeded_replies_are_what_a_load_without_the_lane_gives(laned, tmp_path):
    plain = runtime(tmp_path, None)
    try:
        assert not any(n.startswith("attention:") for n in plain.loaded()[0].notes)
        for sampling in (Sampling(temperature=0, max_tokens=24, logprobs=0),
                         Sampling(temperature=0.8, seed=11, max_tokens=24, logprobs=0)):
            with_lane = ask(laned, [*HISTORY, QUESTION], sampling)
            without = ask(plain, [*HISTORY, QUESTION], sampling)
            assert with_lane[0] == without[0] and with_lane[2] == without[2]
    finally:
        plain.close()


def test_a_converted_state_decodes_as_the_lane_evaluating_it_would(smollm2_path, monkeypatch):
    """The oracle is the lane's own evaluation of the same tokens: a state from the exact context
    (q8_0, rotated heads, V by cell) converted to plain attention's layout gives the next token's logits
    within the two kinds' own difference, and the same next token."""
    import llama_cpp as lc

    with sequences({"n_ctx": 512, "n_seq_max": 2, "flash_attn": True, "type_k": 8, "type_v": 8}) as kw:
        llama = lc.Llama(model_path=str(smollm2_path), verbose=False, **kw)
    try:
        lane = lanes.open_lane(llama, "f16", 0, flash_attn=False)
        tokens = llama.tokenize(b"The lighthouse keeper wrote in the logbook every night. " * 6, add_bos=True)
        model = llama._model.model

        def decode(ctx, seq: int, toks: list[int], first: int) -> np.ndarray:
            batch = lc.llama_batch_init(len(toks), 0, 1)
            batch.n_tokens = len(toks)
            for i, t in enumerate(toks):
                batch.token[i], batch.pos[i], batch.n_seq_id[i] = t, first + i, 1
                batch.seq_id[i][0], batch.logits[i] = seq, i == len(toks) - 1
            assert lc.llama_decode(ctx, batch) == 0
            lc.llama_batch_free(batch)
            return np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, -1), shape=(llama.n_vocab(),)).copy()

        decode(llama.ctx, 0, tokens[:-1], 0)
        state = lanes.convert(kvstate.snapshot(llama.ctx, 0), lc.llama_model_n_layer(model),
                              lc.llama_model_n_head_kv(model), transposed=True)
        assert state is not None and kvstate.restore(lane.ctx, 1, state)
        brought = decode(lane.ctx, 1, tokens[-1:], len(tokens) - 1)
        cold = decode(lane.ctx, 0, tokens, 0)
        exact = decode(llama.ctx, 0, tokens[-1:], len(tokens) - 1)
        assert brought.argmax() == cold.argmax() == exact.argmax()
        assert np.abs(brought - cold).max() <= 2 * np.abs(exact - cold).max() + 0.05
        # read without undoing the rotation, the same state is far off: the check above can fail
        lc.llama_memory_seq_rm(lc.llama_get_memory(llama.ctx), 0, len(tokens) - 1, -1)  # as it was converted
        monkeypatch.setenv("LLAMA_ATTN_ROT_DISABLE", "1")
        rotated = lanes.convert(kvstate.snapshot(llama.ctx, 0), lc.llama_model_n_layer(model),
                                lc.llama_model_n_head_kv(model), transposed=True)
        assert rotated is not None and kvstate.restore(lane.ctx, 1, rotated)
        wrong = decode(lane.ctx, 1, tokens[-1:], len(tokens) - 1)
        assert np.abs(wrong - cold).max() > 4 * np.abs(brought - cold).max()
        cut = kvstate.snapshot(llama.ctx, 0)[:-7]  # a state this does not read: refused, not loaded
        assert lanes.convert(cut, lc.llama_model_n_layer(model), lc.llama_model_n_head_kv(model), True) is None
    finally:
        llama.close()


def test_a_lane_conversation_comes_back_from_the_prompt_cache_after_a_restart(tmp_path):
    from fireside.engine.runner import kvcache

    rt = runtime(tmp_path, FIGURES)
    try:
        first, used, _ = ask(rt, [*HISTORY, QUESTION], Sampling(temperature=0, max_tokens=8))
        follow = [*HISTORY, QUESTION, {"role": "assistant", "content": first}, {"role": "user", "content": "And visitor 9?"}]
        text, lane_turn, _ = ask(rt, follow, Sampling(temperature=0.7, max_tokens=8))
        folder = rt.settings.prompt_cache_dir  # the lane's state is filed under an identity of its own
        wait_until(lambda: len({e.identity for e in kvcache.entries(folder)}) == 2
                   and max(e.n_tokens for e in kvcache.entries(folder)) >= lane_turn.prompt_tokens, 30)
    finally:
        rt.close()
    again = runtime(tmp_path, FIGURES)
    try:
        more = [*follow, {"role": "assistant", "content": text}, {"role": "user", "content": "And visitor 11?"}]
        reply, usage, _ = ask(again, more, Sampling(temperature=0.7, max_tokens=8))
        assert reply.strip() and usage.restored_tokens >= lane_turn.prompt_tokens
    finally:
        again.close()
