"""Images in chats, on the tiny vision pair (``tests/helpers/vision_model.py``) through the real runtime:
the runner's greedy replies match llama-cpp-python's own ``MTMDChatHandler`` on the same pair and
images, a conversation's image is not evaluated again on its next turn (nor after a restart, from the
prompt cache on disk), an image sent again gets the same reply whether the runner kept its chunks or
not, images and text streams share the runner, and an image a model cannot hold or see is refused with a
clear error."""

from __future__ import annotations

import threading

import pytest

from fireside.engine.errors import ContextOverflow, ImageRejected, NoVision
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.prompts.images import decode_image
from fireside.engine.runner.vision import RECENT_IMAGES
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.vision_model import IMAGE_TOKENS, data_url, image_bytes, oracle_replies

pytestmark = pytest.mark.model

QUESTION = "What is in this picture?"
LONG = "Describe this picture in detail, please: its shapes, its colours and anything unusual in it."  # past the cache's 64-token floor
IMAGES = [image_bytes(1), image_bytes(2, (200, 120)), image_bytes(3, (640, 480), "JPEG")]  # three images, three sizes
TYPES = ["image/png", "image/png", "image/jpeg"]


def greedy(max_tokens: int = 12) -> Sampling:
    return Sampling(temperature=0.0, repeat_penalty=1.0, max_tokens=max_tokens)


def ask(runtime, model: str, messages: list[dict], max_tokens: int = 12):
    chunks = list(runtime.chat(model, ChatRequest(messages, greedy(max_tokens))))
    return "".join(c.text for c in chunks if c.kind == "text"), chunks[-1].usage


def with_image(data: bytes, text: str = QUESTION) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": text}, decode_image(data).part()]}]


@pytest.fixture(scope="module")
def runtime(vision_pair, tmp_path_factory):
    model, mmproj = vision_pair
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("vision"))})
    settings.ensure_dirs()
    rt = Runtime(settings, resolver=lambda ref: model, idle_ttl_s=0)
    rt.load("tiny-vision", LoadOptions(context=1024, parallel=3, mmproj=str(mmproj)))
    yield rt
    rt.close()


def test_replies_match_mtmd_chat_handler_on_three_images(runtime, vision_pair):
    conversations = [[{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                                   {"type": "image_url", "image_url": {"url": data_url(b, t)}}]}]
                     for b, t in zip(IMAGES, TYPES)]
    want = oracle_replies(*vision_pair, conversations)
    got = [ask(runtime, "tiny-vision", with_image(b)) for b in IMAGES]
    assert [text for text, _ in got] == want
    assert len(set(want)) == 3  # the image sways the reply: each gives its own
    assert all(usage.prompt_tokens > IMAGE_TOKENS for _, usage in got)  # usage counts the image's tokens


def test_same_image_same_reply_and_next_turn_reuses_the_image(runtime):
    first, usage1 = ask(runtime, "tiny-vision", with_image(IMAGES[1], "Describe it."))
    again, _ = ask(runtime, "tiny-vision", with_image(IMAGES[1], "Describe it."))
    assert again == first
    turn2 = with_image(IMAGES[1], "Describe it.") + [{"role": "assistant", "content": first},
                                                      {"role": "user", "content": "And the colours?"}]
    _, usage2 = ask(runtime, "tiny-vision", turn2)
    # the first turn's prompt, image included, came from the slot's cache
    assert usage2.cached_tokens >= usage1.prompt_tokens - 1


def test_an_image_seen_again_gets_its_reply_whether_its_chunks_were_kept_or_evicted(runtime):
    seen = [image_bytes(40 + i) for i in range(RECENT_IMAGES + 2)]  # the first ones' chunks are dropped
    first = [ask(runtime, "tiny-vision", with_image(b, "Name it."))[0] for b in seen]
    assert len(set(first)) > 1
    again = [ask(runtime, "tiny-vision", with_image(b, "Name it."))[0] for b in (seen[0], seen[-1])]
    assert again == [first[0], first[-1]]  # tokenized afresh, and copied from the kept chunks


def test_a_file_sent_again_is_checked_against_the_type_it_claims_each_time():
    jpeg = image_bytes(7, (64, 48), "JPEG")
    image = decode_image(jpeg, "image/jpeg")
    assert decode_image(jpeg, "image/jpeg") is image  # remembered: the next turn does not decode it again
    with pytest.raises(ImageRejected, match="the data says image/png, but the bytes are image/jpeg"):
        decode_image(jpeg, "image/png")


def test_two_image_requests_and_a_text_stream_all_complete(runtime):
    results: dict[str, str] = {}

    def run(key, messages):
        results[key] = ask(runtime, "tiny-vision", messages, max_tokens=24)[0]

    threads = [threading.Thread(target=run, args=("a", with_image(IMAGES[0]))),
               threading.Thread(target=run, args=("b", with_image(IMAGES[2]))),
               threading.Thread(target=run, args=("text", [{"role": "user", "content": "Tell me a story."}]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    alone = ask(runtime, "tiny-vision", with_image(IMAGES[0]), max_tokens=24)[0]
    assert set(results) == {"a", "b", "text"} and all(results.values())
    assert results["a"] == alone  # decoded beside the others, the same greedy reply


def test_more_images_than_the_context_holds_is_context_overflow(vision_pair, tmp_path):
    rt = session(tmp_path, vision_pair)
    try:
        parts = [{"type": "text", "text": "Compare these."}] + [decode_image(b).part() for b in IMAGES * 12]
        with pytest.raises(ContextOverflow):
            ask(rt, "tiny-vision", [{"role": "user", "content": parts}])
        assert ask(rt, "tiny-vision", with_image(IMAGES[0]))[0]  # the runner goes on
    finally:
        rt.close()


def session(home, vision_pair, mmproj: bool = True) -> Runtime:
    model, projector = vision_pair
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    rt = Runtime(settings, resolver=lambda ref: model, idle_ttl_s=0)
    rt.load("tiny-vision", LoadOptions(context=512, parallel=1, mmproj=str(projector) if mmproj else None))
    return rt


def test_after_a_restart_the_image_comes_from_the_prompt_cache_on_disk(vision_pair, tmp_path):
    rt = session(tmp_path, vision_pair)
    try:
        reply, first = ask(rt, "tiny-vision", with_image(IMAGES[2], LONG))
    finally:
        rt.close()  # the runner ends; the conversation's KV state, image included, stays on disk
    turn2 = with_image(IMAGES[2], LONG) + [{"role": "assistant", "content": reply},
                                           {"role": "user", "content": "And the colours?"}]
    rt = session(tmp_path, vision_pair)
    try:
        _, second = ask(rt, "tiny-vision", turn2)
        other, third = ask(rt, "tiny-vision", with_image(IMAGES[0], LONG))
    finally:
        rt.close()
    assert second.restored_tokens >= first.prompt_tokens - 1  # the image's tokens were loaded, not encoded
    assert third.cached_tokens < first.prompt_tokens - IMAGE_TOKENS  # another image is never taken for it
    assert other != reply


def test_a_text_only_model_says_it_cannot_see_images(vision_pair, tmp_path):
    rt = session(tmp_path, vision_pair, mmproj=False)
    try:
        with pytest.raises(NoVision, match="cannot see images"):
            list(rt.chat("tiny-vision", ChatRequest(with_image(IMAGES[0]), greedy())))
        assert ask(rt, "tiny-vision", [{"role": "user", "content": "Hello"}])[0]  # text still works
    finally:
        rt.close()


def test_a_projector_for_another_model_leaves_the_model_loaded_for_text(vision_pair, tmp_path):
    from tests.helpers.vision_model import write_projector

    model, _ = vision_pair
    wrong = write_projector(tmp_path / "mmproj-wide.gguf", n_embd_text=96)  # 96 wide; the model is 64
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    settings.ensure_dirs()
    rt = Runtime(settings, resolver=lambda ref: model, idle_ttl_s=0)
    try:
        loaded = rt.load("tiny-vision", LoadOptions(context=512, parallel=1, mmproj=str(wrong)))
        assert not loaded.vision and any("text only" in w for w in loaded.warnings)
        assert ask(rt, "tiny-vision", [{"role": "user", "content": "Hello"}])[0]
        with pytest.raises(NoVision):
            ask(rt, "tiny-vision", with_image(IMAGES[0]))
    finally:
        rt.close()
