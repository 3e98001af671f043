"""A draft model (runner/draftmodel.py) changes how fast a reply comes, never what it says.

The starter drafts for itself: its greedy guesses are the reply's own tokens, so with no penalty
between its logits and the reply's greedy choice it must accept every one of them and give the same
text token for token. Its context evaluates the prompt in one batch and then one token at a time while
the model verifies a draft in a batch of several: on an f16 KV cache llama.cpp's attention rounds
those differently (70% of drafts were taken on an AMD EPYC), on the cache a load takes by default
(models/exactness.py, ``kv_for``) it computes each token the same way in either. The tiny text model of
the vision pair (SmolLM2's vocabulary, random weights) guesses badly: same text, and its guesses
stop once they do not pay. A draft whose vocabulary differs in two tokens is refused, with a message
saying which, and the model loads without it. Compared pairs share the cache state as in test_drafts.py.
"""

from __future__ import annotations

import threading

import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.engine.runner.test_drafts import PROMPTS
from tests.helpers.models import own_warnings, smollm2_file
from tests.helpers.vision_model import write_text_model

pytestmark = pytest.mark.model
MAX_TOKENS = 24


def _runtime(tmp_path_factory, name: str) -> Runtime:
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp(name))})
    settings.ensure_dirs()
    return Runtime(settings, idle_ttl_s=0)


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    rt = _runtime(tmp_path_factory, "draft-model")
    loaded = rt.load("starter", LoadOptions(context=1024, parallel=4, draft="starter"))
    assert loaded.draft == "starter" and not own_warnings(loaded.warnings)
    yield rt
    rt.close()


def chat(runtime, text, drafts=None, model="starter", **sampling):
    request = ChatRequest([{"role": "user", "content": text}], Sampling(**sampling), drafts=drafts)
    chunks = list(runtime.chat(model, request))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage


def test_the_starter_drafting_for_itself_gives_the_same_text_and_every_draft_is_taken(runtime):
    drafted = accepted = 0
    greedy = {"temperature": 0, "repeat_penalty": 1.0}  # the reply's choice is the logits' argmax, as the draft's
    for text in PROMPTS[::5]:  # six of the thirty: n-gram drafts take all thirty (test_drafts.py)
        chat(runtime, text, drafts=False, max_tokens=1, **greedy)  # the prompt, cached
        off, off_usage = chat(runtime, text, drafts=False, max_tokens=MAX_TOKENS, **greedy)
        on, usage = chat(runtime, text, max_tokens=MAX_TOKENS, **greedy)
        assert on == off, text
        assert (usage.completion_tokens, off_usage.draft_tokens) == (off_usage.completion_tokens, 0)
        drafted, accepted = drafted + usage.draft_tokens, accepted + usage.accepted_draft_tokens
    assert accepted == drafted > 0, (accepted, drafted)


def test_seeded_sampled_replies_are_the_same_with_a_draft_model(runtime):
    for seed, text in enumerate(PROMPTS[:3]):
        kw = {"temperature": 0.8, "seed": seed, "max_tokens": MAX_TOKENS}
        chat(runtime, text, drafts=False, **{**kw, "max_tokens": 1})
        off, _ = chat(runtime, text, drafts=False, **kw)
        on, usage = chat(runtime, text, **kw)
        assert on == off, text
        assert usage.accepted_draft_tokens > 0  # guesses were verified under sampling, and taken


def test_four_slots_draft_from_the_model_at_once(runtime):
    # long prompts, unlike each other: each keeps a slot of its own. Short ones share only the system
    # prompt, get evaluated four to a batch, and a near tie then flips with drafting off too (batch.py)
    texts = PROMPTS[:4]
    for text in texts:
        chat(runtime, text, drafts=False, temperature=0, max_tokens=1)
    alone = [chat(runtime, text, drafts=False, temperature=0, max_tokens=MAX_TOKENS)[0] for text in texts]
    results: dict[int, tuple] = {}

    def ask(i: int) -> None:
        results[i] = chat(runtime, texts[i], temperature=0, max_tokens=MAX_TOKENS)

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [results[i][0] for i in range(4)] == alone
    assert all(results[i][1].accepted_draft_tokens > 0 for i in range(4))


def test_a_draft_model_that_guesses_badly_changes_nothing_and_stops_guessing(tmp_path_factory, vision_pair):
    rt = _runtime(tmp_path_factory, "bad-draft")
    try:
        loaded = rt.load("starter", LoadOptions(context=1024, parallel=1, draft=str(vision_pair[0])))
        assert loaded.draft and not own_warnings(loaded.warnings)
        text = "Write a short story about a lighthouse keeper."
        chat(rt, text, drafts=False, temperature=0, max_tokens=1)
        off, _ = chat(rt, text, drafts=False, temperature=0, max_tokens=160)
        on, usage = chat(rt, text, temperature=0, max_tokens=160)
        assert on == off
        # paused after its misses, for longer each time (drafts.py): 64 guesses in 160 tokens, fewer after
        assert usage.accepted_draft_tokens < 8 and 0 < usage.draft_tokens <= 0.4 * usage.completion_tokens, usage
    finally:
        rt.close()


def test_a_draft_model_with_another_vocabulary_is_refused_saying_why(tmp_path_factory):
    folder = tmp_path_factory.mktemp("other-vocab")
    other = write_text_model(folder / "other-vocab.gguf", smollm2_file(), swap_tokens=(1000, 1001))
    rt = _runtime(tmp_path_factory, "refused-draft")
    try:
        loaded = rt.load("starter", LoadOptions(context=512, parallel=1, draft=str(other)))
        assert loaded.draft == ""
        assert any("cannot draft for this model: token 1,000 is" in w and "same vocabulary" in w
                   for w in loaded.warnings), loaded.warnings
        text, usage = chat(rt, "Say hello.", temperature=0, max_tokens=8)
        assert text and usage.draft_tokens == 0  # it answers, without drafts
    finally:
        rt.close()


def test_a_draft_model_that_is_not_there_fails_the_load_naming_it(tmp_path_factory):
    from fireside.engine.errors import ModelNotFound

    rt = _runtime(tmp_path_factory, "missing-draft")
    try:
        with pytest.raises(ModelNotFound, match="the draft model for starter cannot be used: no model named 'nope'"):
            rt.load("starter", LoadOptions(context=512, parallel=1, draft="nope"))
    finally:
        rt.close()
