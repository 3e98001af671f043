"""Images on a projector that places them by 2-D positions (M-RoPE, as Qwen2-VL and its kin do), on the
tiny M-RoPE pair (``tests/helpers/vision_model.py``): an image of ``nx`` by ``ny`` embeddings takes
``max(nx, ny)`` positions, so a slot's positions are no longer one a token. The runner's greedy replies
match llama-cpp-python's own ``MTMDChatHandler`` on images of three sizes, beside other streams too;
the next turn and a restarted runner reuse the image; usage and the context checks count every
embedding; and the server's clients see the same."""

from __future__ import annotations

import threading

import pytest

from fireside.engine.errors import ContextOverflow
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.prompts.images import decode_image
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.vision_model import data_url, image_bytes, mrope_image_tokens, oracle_replies

pytestmark = pytest.mark.model

QUESTION = "What is in this picture?"
LONG = "Describe this picture in detail, please: its shapes, its colours and anything unusual in it."  # past the cache's 64-token floor
SIZES = [(64, 48), (96, 96), (40, 120)]  # three grids: wide, square, tall
IMAGES = [image_bytes(11 + i, size) for i, size in enumerate(SIZES)]


def greedy(max_tokens: int = 12) -> Sampling:
    return Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=max_tokens)


def ask(runtime, messages: list[dict], max_tokens: int = 12):
    chunks = list(runtime.chat("tiny-mrope", ChatRequest(messages, greedy(max_tokens))))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage


def with_image(data: bytes, text: str = QUESTION) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": text}, decode_image(data).part()]}]


def session(home, pair, context: int = 1024, parallel: int = 3) -> Runtime:
    model, projector = pair
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    rt = Runtime(settings, resolver=lambda ref: model, idle_ttl_s=0)
    loaded = rt.load("tiny-mrope", LoadOptions(context=context, parallel=parallel, mmproj=str(projector)))
    assert loaded.vision
    return rt


@pytest.fixture(scope="module")
def runtime(mrope_pair, tmp_path_factory):
    rt = session(tmp_path_factory.mktemp("mrope"), mrope_pair)
    yield rt
    rt.close()


def test_replies_match_mtmd_chat_handler_on_three_grids(runtime, mrope_pair):
    conversations = [[{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                                   {"type": "image_url", "image_url": {"url": data_url(b)}}]}]
                     for b in IMAGES]
    want = oracle_replies(*mrope_pair, conversations)
    got = [ask(runtime, with_image(b)) for b in IMAGES]
    assert [text for text, _ in got] == want
    assert len(set(want)) == 3  # each image sways the reply its own way
    text_only = ask(runtime, [{"role": "user", "content": QUESTION}])[1].prompt_tokens
    for (_, usage), size in zip(got, SIZES):  # every embedding counted, not the positions it takes
        assert usage.prompt_tokens >= text_only + mrope_image_tokens(*size)[0]


def test_next_turn_reuses_the_image_and_beside_other_streams_the_reply_is_the_same(runtime):
    first, usage1 = ask(runtime, with_image(IMAGES[1], "Describe it."), max_tokens=24)
    turn2 = with_image(IMAGES[1], "Describe it.") + [{"role": "assistant", "content": first},
                                                      {"role": "user", "content": "And the colours?"}]
    alone2, usage2 = ask(runtime, turn2)
    assert usage2.cached_tokens >= usage1.prompt_tokens - 1  # counted in embeddings, as prompt_tokens is

    results: dict[str, str] = {}

    def run(key, messages, max_tokens=24):
        results[key] = ask(runtime, messages, max_tokens)[0]

    threads = [threading.Thread(target=run, args=("a", with_image(IMAGES[1], "Describe it."))),
               threading.Thread(target=run, args=("b", with_image(IMAGES[2]))),
               threading.Thread(target=run, args=("text", [{"role": "user", "content": "Tell me a story."}], 48))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(results) == {"a", "b", "text"} and all(results.values())
    assert results["a"] == first  # decoded beside an image and a text stream: the same greedy reply


def test_after_a_restart_the_image_comes_from_the_prompt_cache_on_disk(mrope_pair, tmp_path):
    rt = session(tmp_path, mrope_pair, context=512, parallel=1)
    try:
        reply, first = ask(rt, with_image(IMAGES[0], LONG))
    finally:
        rt.close()
    turn2 = with_image(IMAGES[0], LONG) + [{"role": "assistant", "content": reply},
                                           {"role": "user", "content": "And the colours?"}]
    rt = session(tmp_path, mrope_pair, context=512, parallel=1)
    try:
        got, second = ask(rt, turn2)
        other, third = ask(rt, with_image(IMAGES[2], LONG))
    finally:
        rt.close()
    assert second.restored_tokens >= first.prompt_tokens - 1
    assert third.cached_tokens < first.prompt_tokens - mrope_image_tokens(*SIZES[0])[0]  # another image is not taken for it
    assert other != reply
    assert got == oracle_replies(*mrope_pair, [[
        {"role": "user", "content": [{"type": "text", "text": LONG},
                                     {"type": "image_url", "image_url": {"url": data_url(IMAGES[0])}}]},
        {"role": "assistant", "content": reply}, {"role": "user", "content": "And the colours?"}]])[0]


def test_the_context_check_counts_every_embedding(mrope_pair, tmp_path):
    """Images whose positions fit the context but whose embeddings do not are refused up front."""
    per_image = mrope_image_tokens(*SIZES[1])[0]
    n = 256 // per_image + 1  # more embeddings than a 256-token slot holds
    rt = session(tmp_path, mrope_pair, context=256, parallel=1)
    try:
        parts = [{"type": "text", "text": "Compare."}] + [decode_image(IMAGES[1]).part()] * n
        with pytest.raises(ContextOverflow):
            ask(rt, [{"role": "user", "content": parts}])
        assert ask(rt, with_image(IMAGES[0]))[0]  # the runner goes on
    finally:
        rt.close()

