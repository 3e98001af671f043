"""The Anthropic dialect through the official ``anthropic`` package, against the real server and SmolLM2."""

from __future__ import annotations

import anthropic
import pytest

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Say hello."}]
WEATHER = {"name": "get_weather", "description": "Current weather in a city",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


@pytest.fixture(scope="module")
def client(base_url):
    return anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0)


def test_whole_message_with_system(client):
    m = client.messages.create(model="starter", max_tokens=5, system="You are terse.", messages=HI,
                               extra_body={"temperature": 0})  # greedy: a sampled reply may end within 5 tokens
    assert m.type == "message" and m.role == "assistant" and m.stop_reason == "max_tokens"
    assert m.content[0].type == "text" and m.content[0].text
    assert m.usage.output_tokens == 5 and m.usage.input_tokens > 0


def test_streamed_message_events(client):
    # greedy (the installed SDK takes no temperature keyword): a sampled "Hello!" can end within 5 tokens
    with client.messages.stream(model="starter", max_tokens=5, messages=HI, extra_body={"temperature": 0}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and "content_block_delta" in kinds and "message_stop" in kinds
    deltas = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert deltas and final.content[0].text == deltas
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 5


def test_forced_tool_use_and_tool_result_turn(client):
    ask = [{"role": "user", "content": "What is the weather in Oslo?"}]
    m = client.messages.create(model="starter", max_tokens=60, tools=[WEATHER], messages=ask, extra_body={"temperature": 0},
                               tool_choice={"type": "tool", "name": "get_weather"})
    assert m.stop_reason == "tool_use"
    use = next(b for b in m.content if b.type == "tool_use")
    assert use.name == "get_weather" and isinstance(use.input["city"], str) and use.id
    follow = ask + [{"role": "assistant", "content": [b.model_dump() for b in m.content]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 C"}]}]
    reply = client.messages.create(model="starter", max_tokens=24, tools=[WEATHER], messages=follow,
                                   tool_choice={"type": "none"}, extra_body={"temperature": 0})
    assert reply.content[0].type == "text" and reply.content[0].text


def test_streamed_tool_use(client):
    # greedy: sampled, the city's string now and then ran past max_tokens (the call cut off, its input empty)
    with client.messages.stream(model="starter", max_tokens=60, tools=[WEATHER], tool_choice={"type": "any"},
                                extra_body={"temperature": 0}, messages=[{"role": "user", "content": "Weather in Lima?"}]) as stream:
        final = stream.get_final_message()
    use = next(b for b in final.content if b.type == "tool_use")
    assert use.name == "get_weather" and "city" in use.input
    assert final.stop_reason == "tool_use"


def test_count_tokens_grows_with_the_conversation(client):
    short = client.messages.count_tokens(model="starter", messages=HI).input_tokens
    turns = HI + [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Now say goodbye."}]
    longer = client.messages.count_tokens(model="starter", messages=turns).input_tokens
    assert 0 < short < longer


def test_errors_in_anthropic_shape(client):
    with pytest.raises(anthropic.NotFoundError) as err:
        client.messages.create(model="nope", max_tokens=5, messages=HI)
    assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model="starter", max_tokens=5, messages=[{"role": "system", "content": "x"}])
    assert err.value.body["error"]["type"] == "invalid_request_error"


def test_system_turns_anywhere_join_the_system_prompt(client):
    """Claude Code sends its list of agents as a second ``system`` turn: it is answered, and its text is
    read as part of the system prompt (the same tokens as one joined system text)."""
    turns = [HI[0], {"role": "system", "content": [{"type": "text", "text": "Agents: none."}]},
             {"role": "user", "content": "Again."}]
    m = client.messages.create(model="starter", max_tokens=4, system="You are terse.", messages=turns)
    assert m.content[0].text
    plain = [HI[0], {"role": "user", "content": "Again."}]
    folded = client.messages.count_tokens(model="starter", system="You are terse.", messages=turns).input_tokens
    joined = client.messages.count_tokens(model="starter", system="You are terse.\n\nAgents: none.",
                                          messages=plain).input_tokens
    assert folded == joined


def test_unfixable_errors_tell_clients_not_to_retry(keyed_server, client):
    wrong = anthropic.Anthropic(base_url=keyed_server.url, api_key="wrong-key", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as err:
        wrong.messages.create(model="starter", max_tokens=5, messages=HI)
    assert err.value.response.headers["x-should-retry"] == "false" and "API key" in err.value.message
    with pytest.raises(anthropic.BadRequestError) as err:
        client.messages.create(model="starter", max_tokens=5, messages=HI, extra_body={"temperature": 3})
    assert err.value.response.headers["x-should-retry"] == "false"


def test_a_slow_prompt_starts_the_stream_and_pings(base_url, monkeypatch):
    """While a long prompt is evaluated the client hears ``message_start`` and ``ping`` events, not
    silence (an agent with an idle watchdog would give up and resend it)."""
    import time

    import httpx

    from fireside.engine.server import streaming

    monkeypatch.setattr(streaming, "EARLY_S", 0.02, raising=False)
    monkeypatch.setattr(streaming, "PING_S", 0.02, raising=False)
    long = f"{time.time_ns()} " + "Tell me about the sea and the ships on it. " * 20  # ~220 tokens, not in any cache
    body = {"model": "starter", "max_tokens": 2, "stream": True, "messages": [{"role": "user", "content": long}]}
    events = []
    with httpx.stream("POST", f"{base_url}/v1/messages", json=body, timeout=120) as r:
        assert r.status_code == 200
        events = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
    first_block = events.index("content_block_start")
    assert events[0] == "message_start" and "ping" in events[1:first_block]
    assert events[-1] == "message_stop"
