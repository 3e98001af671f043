"""Remote engines without a model: the registry file and keys, ids, and stream translation over a mock."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from fireside.engine.errors import ModelNotFound
from fireside.engine.remote import RemoteEngine, RemoteError, RemoteRegistry, split_id
from fireside.engine.remote.client import RemoteClient
from fireside.engine.remote.registry import RemoteEndpoint
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling


@pytest.fixture
def registry(fireside_home):
    return RemoteRegistry(Settings.from_env())


def test_registry_keeps_urls_in_the_file_and_keys_in_the_keyring(registry, memory_keyring):
    registry.add("gpu", "http://gpu-box:8000/v1/", api_key="sk-secret")
    registry.add("lan", "https://lan.example")
    assert [(e.name, e.base_url, e.has_key) for e in registry.list()] == [
        ("gpu", "http://gpu-box:8000", True), ("lan", "https://lan.example", False)]
    assert "sk-secret" not in registry.path.read_text()
    assert registry.api_key(registry.get("gpu")) == "sk-secret"
    registry.remove("gpu")
    assert memory_keyring.store == {} and [e.name for e in registry.list()] == ["lan"]
    with pytest.raises(RemoteError, match="no remote engine named 'gpu'"):
        registry.remove("gpu")


@pytest.mark.parametrize("name, url, message", [("a/b", "http://x", "not a usable remote name"),
                                               ("", "http://x", "not a usable remote name"),
                                               ("ok", "file:///etc/passwd", "not an http"),
                                               ("ok", "gpu-box:8000", "not an http")])
def test_registry_refuses_bad_names_and_urls(registry, name, url, message):
    with pytest.raises(RemoteError, match=message):
        registry.add(name, url)
    assert registry.list() == []


def test_remote_ids_keep_the_remote_model_id_whole():
    assert split_id("remote/gpu/meta-llama/Llama-3.1-8B") == ("gpu", "meta-llama/Llama-3.1-8B")
    with pytest.raises(ModelNotFound):
        split_id("remote/gpu")


def _sse(*events) -> bytes:
    return b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events) + b"data: [DONE]\n\n"


def test_streamed_tool_call_fragments_become_one_tool_calls_chunk():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content), auth=request.headers.get("authorization"))
        body = _sse({"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "call_1", "function": {
                        "name": "get_weather", "arguments": '{"ci'}}]}}]},
                    {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'ty": "Oslo"}'}}]},
                                  "finish_reason": "tool_calls"}]},
                    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 7}})
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    endpoint = RemoteEndpoint("gpu", "http://gpu-box:8000", True)
    http = httpx.Client(base_url=endpoint.base_url, transport=httpx.MockTransport(handler),
                        headers={"Authorization": "Bearer sk-1"})
    request = ChatRequest([{"role": "user", "content": "weather?"}], Sampling(max_tokens=30, temperature=0.0),
                          tools=[{"type": "function", "function": {"name": "get_weather"}}],
                          tool_choice={"name": "get_weather"})
    chunks = list(RemoteClient(endpoint, client=http).chat("llama", request, threading.Event()))
    assert [c.kind for c in chunks] == ["tool_calls", "done"]
    call = chunks[0].tool_calls[0]
    assert (call.id, call.name, json.loads(call.arguments)) == ("call_1", "get_weather", {"city": "Oslo"})
    assert chunks[1].finish_reason == "tool_calls" and chunks[1].usage.completion_tokens == 7
    assert seen["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert seen["model"] == "llama" and seen["max_tokens"] == 30 and seen["auth"] == "Bearer sk-1"
    assert "top_k" not in seen and "min_p" not in seen  # llama.cpp-only knobs are not sent


def test_a_dead_remote_lists_nothing_and_says_why(registry):
    registry.add("dead", "http://127.0.0.1:9")
    engine = RemoteEngine(Settings.from_env(), registry)
    try:
        assert engine.models() == []
        (status,) = engine.statuses()
        assert "cannot be reached" in status.error
        with pytest.raises(RemoteError, match="remote engine 'dead' at http://127.0.0.1:9 cannot be reached"):
            engine.check("remote/dead/any")
    finally:
        engine.close()


def test_an_image_goes_to_a_remote_as_a_png_data_url_of_the_same_pixels():
    import base64
    import io

    from PIL import Image as PILImage

    from fireside.engine.prompts.images import decode_image
    from tests.helpers.vision_model import image_bytes

    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.update(json.loads(request.content))
        body = _sse({"choices": [{"delta": {"content": "a cat"}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}})
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    endpoint = RemoteEndpoint("gpu", "http://gpu-box:8000", True)
    image = decode_image(image_bytes(5, (30, 20), "JPEG"), "image/jpeg")
    request = ChatRequest([{"role": "user", "content": [{"type": "text", "text": "what?"}, image.part()]}])
    http = httpx.Client(base_url=endpoint.base_url, transport=httpx.MockTransport(handler))
    chunks = list(RemoteClient(endpoint, client=http).chat("llava", request, threading.Event()))
    assert chunks[0].text == "a cat"
    text, sent = seen["messages"][0]["content"]
    assert text == {"type": "text", "text": "what?"} and sent["type"] == "image_url"
    url = sent["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    decoded = PILImage.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert decoded.convert("RGB").tobytes() == image.pixels  # lossless: the remote sees the same pixels
