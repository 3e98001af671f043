"""The Responses API's store of conversations (for ``previous_response_id``) is bounded by bytes, not
only by count: each entry keeps its whole conversation, so 256 long ones held gigabytes."""

from __future__ import annotations

import openai
import pytest

from fireside.engine.server import ServerThread, create_app
from fireside.engine.server.context import RESPONSES_MAX_BYTES, ResponseStore, held_bytes

MiB = 1024 * 1024


def test_the_store_keeps_the_newest_conversations_within_its_bytes():
    store = ResponseStore()
    text = "x" * MiB
    for i in range(100):  # 100 MiB of conversations: far fewer than 256, far more than the budget
        store.put(f"resp_{i}", [{"role": "user", "content": text}, {"role": "assistant", "content": f"reply {i}"}])
    assert store.get("resp_99")[1]["content"] == "reply 99"
    assert store.get("resp_0") is None  # the oldest went first
    kept = [i for i in range(100) if store.get(f"resp_{i}")]
    assert kept == list(range(100 - len(kept), 100)) and len(kept) == RESPONSES_MAX_BYTES // (MiB + 200)
    assert store.bytes <= RESPONSES_MAX_BYTES == 64 * MiB


def test_one_conversation_over_the_budget_is_not_kept_and_keeps_the_others():
    store = ResponseStore(max_bytes=4 * MiB)
    store.put("small", [{"role": "user", "content": "hi"}])
    store.put("huge", [{"role": "user", "content": "y" * (5 * MiB)}])
    assert store.get("huge") is None and store.get("small") == [{"role": "user", "content": "hi"}]
    assert store.bytes == held_bytes([{"role": "user", "content": "hi"}])


def test_a_nested_tool_call_counts_too():
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "z" * MiB}}]}
    assert held_bytes([call]) > MiB


@pytest.mark.model
def test_continuing_a_response_the_budget_let_go_is_a_404(runtime, server_settings, library):
    app = create_app(runtime, server_settings, library)
    app.state.fireside.responses = ResponseStore(max_bytes=4_000)
    thread = ServerThread(app, "127.0.0.1", 0)
    thread.start()
    try:
        client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="x", max_retries=0, timeout=300)
        long = "Remember this. " * 100  # 1,500 characters: three of them pass the 4,000-byte budget
        ids = [client.responses.create(model="starter", input=long + str(i), max_output_tokens=2).id
               for i in range(3)]
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model="starter", previous_response_id=ids[0], input="and?", max_output_tokens=2)
        kept = client.responses.create(model="starter", previous_response_id=ids[2], input="and?", max_output_tokens=2)
        assert kept.usage.input_tokens > 300  # the history came along
    finally:
        thread.stop()
