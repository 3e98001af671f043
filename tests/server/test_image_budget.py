"""A request's images are weighed before any is decoded, and decoded off the event loop (issue 42, case 3).

Ten 4096x4096 1-bit PNGs are a 29 KB request; the old server decoded them on its event loop (4.3 s, +640
MB, another client's ``GET /api/version`` waiting as long) only to refuse them because the model reads
text. Now a request past ``MAX_REQUEST_IMAGES`` or ``MAX_REQUEST_PIXELS`` is a 413 that says the limits,
decided from the files' headers; images within them are decoded on a worker thread while other clients
are served. Over the real server and the real SmolLM2, with the official clients.
"""

from __future__ import annotations

import base64
import io
import threading
import time

import anthropic
import httpx
import openai
import pytest
from PIL import Image

from fireside.engine.prompts.images import decode_image, probe_image
from fireside.engine.server.context import ResponseStore
from fireside.engine.server.imagebudget import MAX_REQUEST_IMAGES, MAX_REQUEST_PIXELS
from tests.helpers.flowing import Stream, peak_rss_during

pytestmark = pytest.mark.model


def _png_url(size: int = 4096) -> str:
    buf = io.BytesIO()
    Image.new("1", (size, size)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _ask(base_url: str, urls: list[str]) -> httpx.Response:
    parts = [{"type": "text", "text": "What is in these pictures?"}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return httpx.post(f"{base_url}/v1/chat/completions", timeout=120, json={
        "model": "starter", "max_tokens": 2, "messages": [{"role": "user", "content": parts}]})


class Pinger(threading.Thread):
    """Another client asking ``GET /api/version`` over and over; notes the slowest answer."""

    def __init__(self, base_url: str):
        super().__init__(daemon=True)
        self.url, self.worst, self.done = f"{base_url}/api/version", 0.0, threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=60) as client:
            while not self.done.is_set():
                started = time.monotonic()
                client.get(self.url).raise_for_status()
                self.worst = max(self.worst, time.monotonic() - started)
                time.sleep(0.02)


def test_ten_big_images_are_a_413_from_their_headers_alone(base_url):
    urls = [_png_url()] * 10
    assert sum(map(len, urls)) < 40_000
    with Stream(base_url) as stream:
        start = time.monotonic()
        reply, grew = peak_rss_during(_ask, base_url, urls)
        end = time.monotonic()
    stream.assert_flowed(start, end)
    assert reply.status_code == 413 and end - start < 2
    error = reply.json()["error"]
    assert f"{MAX_REQUEST_IMAGES} images and {MAX_REQUEST_PIXELS:,} pixels" in error["message"]
    assert "10 images of 167,772,160 pixels" in error["message"]
    assert grew < 100 * 1024 * 1024, f"the server grew {grew >> 20} MB"


def test_seventeen_small_images_are_too_many_for_one_request(base_url):
    claude = anthropic.Anthropic(base_url=base_url, api_key="x", max_retries=0)
    data = _png_url(8).split(",", 1)[1]
    blocks = [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}] * 17
    with pytest.raises(anthropic.APIStatusError) as caught:
        claude.messages.count_tokens(model="starter", messages=[{"role": "user", "content": blocks}])
    assert caught.value.status_code == 413 and "17 images" in str(caught.value)


def test_images_within_the_budget_are_decoded_off_the_event_loop(base_url):
    urls = [_png_url(), _png_url(4095)]  # two files: nothing remembered from another test
    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=120)
    client.chat.completions.create(model="starter", max_tokens=1, messages=[{"role": "user", "content": "Hi"}])  # loaded
    pinger = Pinger(base_url)
    pinger.start()
    try:
        time.sleep(0.2)
        parts = [{"type": "text", "text": "Hi"}, *({"type": "image_url", "image_url": {"url": u}} for u in urls)]
        with pytest.raises(openai.BadRequestError) as caught:  # decoded, then refused: the starter reads text only
            client.chat.completions.create(model="starter", max_tokens=2, messages=[{"role": "user", "content": parts}])
    finally:
        pinger.done.set()
        pinger.join(60)
    assert caught.value.body["code"] == "model_cannot_see_images"
    assert pinger.worst < 0.3, f"another client's GET /api/version waited {pinger.worst:.2f} s"


def test_a_kept_conversation_counts_its_images_against_the_store_budget():
    data = base64.b64decode(_png_url(64).split(",", 1)[1])
    store = ResponseStore(max_bytes=50_000)  # 64x64 RGB pixels are 12,288 bytes
    turn = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, decode_image(data).part()]}]
    for i in range(8):
        store.put(f"resp_{i}", turn)
    assert store.bytes <= 50_000 and store.get("resp_0") is None and store.get("resp_7") is not None
    assert store.bytes >= 3 * 64 * 64 * 3  # the images are counted, not only the text
    files = [{"role": "user", "content": [probe_image(data).part()]}]
    store.put("resp_file", files)
    assert store.bytes >= len(data)

