"""The rows of docs/api.md's conformance matrix, each through the official client of its dialect,
against the real server and SmolLM2: what streams as the services stream it (tool calls in
fragments, Anthropic's input count and stop sequences), log-probabilities, and every refusal, which
must be a 400 that names its field."""

from __future__ import annotations

import json
import math

import anthropic
import ollama
import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState

from fireside.engine.server.handler import at_most_calls
from fireside.engine.server.openai import ChatEncoder
from fireside.engine.structured.parsing import StreamParser

pytestmark = pytest.mark.model
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                   "required": ["city", "unit"]}}}
FORCED = {"type": "function", "function": {"name": "get_weather"}}
ASK = [{"role": "user", "content": "What is the weather in Paris, in celsius?"}]
HI = [{"role": "user", "content": "Say hello."}]
GREEDY = {"temperature": 0}  # this anthropic package no longer declares temperature; the API still takes it
CLAUDE_WEATHER = {"name": "get_weather", "description": "Current weather in a city",
                  "input_schema": WEATHER["function"]["parameters"]}


@pytest.fixture(scope="module")
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def claude(base_url):
    return anthropic.Anthropic(base_url=base_url, api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def oll(base_url):
    return ollama.Client(host=base_url, timeout=300)


# --- OpenAI: tool calls stream as OpenAI streams them ---------------------------------------------------
def test_a_streamed_tool_call_sends_its_name_first_then_argument_fragments(oai):
    events = [e for e in oai.chat.completions.create(model="starter", messages=ASK, tools=[WEATHER], tool_choice=FORCED,
                                                      max_tokens=60, temperature=0, stream=True) if e.choices]
    deltas = [tc for e in events for tc in e.choices[0].delta.tool_calls or []]
    head, *rest = deltas
    assert (head.index, head.type, head.function.name, head.function.arguments) == (0, "function", "get_weather", "")
    assert head.id.startswith("call_")
    assert len(rest) >= 4 and all(d.id is None and d.function.name is None and d.index == 0 for d in rest)
    arguments = json.loads("".join(d.function.arguments for d in rest))
    assert set(arguments) == {"city", "unit"}
    assert events[-1].choices[0].finish_reason == "tool_calls"
    whole = oai.chat.completions.create(model="starter", messages=ASK, tools=[WEATHER], tool_choice=FORCED,
                                        max_tokens=60, temperature=0)
    # the same call as a whole: the same JSON (the second request reuses the first's cached prompt, and a
    # prompt evaluated in another split can flip a near tie between two spellings of the same JSON)
    assert json.loads(whole.choices[0].message.tool_calls[0].function.arguments) == arguments


def test_several_tool_calls_stream_under_their_own_indices_for_the_official_accumulator():
    """SmolLM2 does not make two calls on cue, so the runtime's parser is fed a two-call reply and the
    server's encoder output goes through the openai package's own stream accumulator."""
    parser, encoder = StreamParser(tools=True), ChatEncoder("starter", include_usage=False)
    raw = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>\n'
           '<tool_call>{"name": "get_time", "arguments": {"zone": "CET"}}</tool_call>')
    chunks = [c for ch in raw for c in parser.feed(ch)] + list(parser.finish())
    state = ChatCompletionStreamState()
    fragments = 0
    for chunk in chunks:
        for event in encoder.chunk(chunk):
            payload = json.loads(event.decode().removeprefix("data: "))
            fragments += bool(payload["choices"][0]["delta"].get("tool_calls"))
            state.handle_chunk(openai.types.chat.ChatCompletionChunk.model_validate(
                {**payload, "choices": [{**payload["choices"][0], "finish_reason": None}]}))
    calls = state.current_completion_snapshot.choices[0].message.tool_calls
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"})]
    assert fragments > 10


def test_parallel_tool_calls_false_keeps_the_first_of_several_calls():
    """``parallel_tool_calls: false`` (and Anthropic's ``disable_parallel_tool_use``) go through
    ``at_most_calls(..., 1)``; SmolLM2 makes one call when forced, so a two-call reply is fed in here."""
    parser = StreamParser(tools=True)
    raw = ('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}</tool_call>')
    chunks = list(at_most_calls(iter([c for ch in raw for c in parser.feed(ch)] + list(parser.finish())), 1))
    assert [c.name for ch in chunks if ch.kind == "tool_calls" for c in ch.tool_calls] == ["a"]
    assert {ch.index for ch in chunks if ch.kind == "tool_call_delta"} == {0}


def test_penalties_change_the_reply(oai):
    def reply(**kwargs):
        return oai.chat.completions.create(model="starter", messages=[{"role": "user", "content": "Repeat: la la la la"}],
                                           max_tokens=24, temperature=0, **kwargs).choices[0].message.content

    plain = reply()
    assert reply(frequency_penalty=2.0) != plain and reply(presence_penalty=2.0) != plain


@pytest.mark.parametrize("route,body,field", [
    ("completions", {"prompt": ["one", "two"]}, "prompt"),
    ("completions", {"prompt": [1, 2, 3]}, "prompt"),
    ("embeddings", {"input": [[1, 2, 3]]}, "input"),
])
def test_several_prompts_or_token_arrays_are_a_400(oai, route, body, field):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.post(f"/{route}", body={"model": "starter", "max_tokens": 2, **body}, cast_to=object)
    assert field in str(refused.value), str(refused.value)


# --- OpenAI: log-probabilities ------------------------------------------------------------------------
def test_chat_logprobs_with_top_alternatives(oai):
    r = oai.chat.completions.create(model="starter", messages=HI, max_tokens=6, temperature=0, logprobs=True,
                                    top_logprobs=3)
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 6
    assert "".join(t.token for t in content) == r.choices[0].message.content
    for t in content:
        assert t.logprob <= 0 and len(t.top_logprobs) == 3 and t.bytes == list(t.token.encode())
        # raw log-probabilities, before the repeat penalty: the greedy pick is at most as likely as the best
        assert t.logprob <= t.top_logprobs[0].logprob + 1e-6
        assert [a.logprob for a in t.top_logprobs] == sorted((a.logprob for a in t.top_logprobs), reverse=True)
    assert any(math.isclose(t.logprob, t.top_logprobs[0].logprob) for t in content)
    plain = oai.chat.completions.create(model="starter", messages=HI, max_tokens=2)
    assert plain.choices[0].logprobs is None


def test_streamed_chat_logprobs_cover_every_token(oai):
    events = [e for e in oai.chat.completions.create(model="starter", messages=HI, max_tokens=6, temperature=0,
                                                      logprobs=True, stream=True) if e.choices]
    tokens = [t for e in events if e.choices[0].logprobs for t in e.choices[0].logprobs.content or []]
    assert len(tokens) == 6
    assert "".join(t.token for t in tokens) == "".join(e.choices[0].delta.content or "" for e in events)


def test_completion_logprobs_and_echo(oai):
    prompt = "The capital of France is"
    r = oai.completions.create(model="starter", prompt=prompt, max_tokens=5, temperature=0, logprobs=2)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 5
    assert "".join(lp.tokens) == r.choices[0].text and lp.text_offset[0] == len(prompt)
    assert all(len(top) <= 2 and x <= 0 for top, x in zip(lp.top_logprobs, lp.token_logprobs))
    echoed = oai.completions.create(model="starter", prompt=prompt, max_tokens=5, temperature=0, echo=True)
    assert echoed.choices[0].text == prompt + r.choices[0].text


@pytest.mark.parametrize("kwargs,field", [
    ({"n": 2}, "n"),
    ({"logit_bias": {"42": 5}}, "logit_bias"),
    ({"modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"}}, "audio"),
    ({"extra_body": {"modalities": ["audio"]}}, "modalities"),
    ({"extra_body": {"functions": [{"name": "f", "parameters": {}}]}}, "functions"),
    ({"top_logprobs": 2}, "top_logprobs"),
    ({"web_search_options": {}}, "web_search_options"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}],
      }, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}]}],
      }, "messages"),
])
def test_chat_fields_that_cannot_be_honoured_are_a_400_naming_them(oai, kwargs, field):
    kwargs = {"model": "starter", "messages": HI, "max_tokens": 2, **kwargs}
    if "web_search_options" in kwargs:
        kwargs["web_search_options"] = {"search_context_size": "low"}
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(**kwargs)
    assert refused.value.param == field or field in str(refused.value), str(refused.value)


@pytest.mark.parametrize("kwargs,field", [
    ({"n": 2}, "n"), ({"best_of": 3}, "best_of"), ({"logit_bias": {"42": 5}}, "logit_bias"),
    ({"suffix": "end."}, "suffix"), ({"echo": True, "logprobs": 1}, "echo"),
])
def test_completion_fields_that_cannot_be_honoured_are_a_400(oai, kwargs, field):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.completions.create(model="starter", prompt="Hi", max_tokens=2, **kwargs)
    assert refused.value.param == field, str(refused.value)


def test_embedding_dimensions_are_refused(oai):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.embeddings.create(model="starter", input="hi", dimensions=8)
    assert refused.value.param == "dimensions"


# --- Anthropic ------------------------------------------------------------------------------------------
def test_message_start_carries_the_real_input_token_count(claude):
    counted = claude.messages.count_tokens(model="starter", messages=HI).input_tokens
    with claude.messages.stream(model="starter", max_tokens=3, messages=HI) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = next(e for e in events if e.type == "message_start")
    # message_start goes out before the runner has looked at its caches, so it counts the whole prompt;
    # the final usage splits it as Anthropic does (input_tokens evaluated, cache_read_input_tokens reused:
    # the same prompt may already sit in a slot or in the prompt cache on disk)
    assert start.message.usage.input_tokens == counted > 0
    assert final.usage.input_tokens + (final.usage.cache_read_input_tokens or 0) == counted


def test_a_stop_sequence_sets_stop_reason_and_stop_sequence(claude):
    free = claude.messages.create(model="starter", max_tokens=12, messages=HI, extra_body=GREEDY)
    text = free.content[0].text
    word = next(w for w in text.split()[1:] if len(w) > 2)
    m = claude.messages.create(model="starter", max_tokens=12, messages=HI, extra_body=GREEDY, stop_sequences=[word])
    assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", word)
    assert m.content[0].text == text[:text.index(word)]
    with claude.messages.stream(model="starter", max_tokens=12, messages=HI, extra_body=GREEDY,
                                stop_sequences=["zzz-never", word]) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", word)
    assert free.stop_sequence is None and free.stop_reason == "max_tokens"


def test_tool_input_streams_as_input_json_delta_fragments(claude):
    with claude.messages.stream(model="starter", max_tokens=60, tools=[CLAUDE_WEATHER], messages=ASK, extra_body=GREEDY,
                                tool_choice={"type": "tool", "name": "get_weather"}) as stream:
        events = list(stream)
        final = stream.get_final_message()
    start = next(e for e in events if e.type == "content_block_start" and e.content_block.type == "tool_use")
    assert start.content_block.name == "get_weather" and start.content_block.input == {}
    fragments = [e.delta.partial_json for e in events if e.type == "content_block_delta"
                 and e.delta.type == "input_json_delta"]
    assert len(fragments) >= 4
    use = next(b for b in final.content if b.type == "tool_use")
    assert json.loads("".join(fragments)) == use.input and set(use.input) == {"city", "unit"}
    assert final.stop_reason == "tool_use"


def test_output_config_format_constrains_the_reply_to_its_schema(claude):
    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name", "age"], "additionalProperties": False}
    m = claude.messages.create(model="starter", max_tokens=40, messages=[{"role": "user", "content": "Invent a person."}],
                               output_config={"format": {"type": "json_schema", "schema": schema}}, extra_body=GREEDY)
    value = json.loads(m.content[0].text)
    assert set(value) == {"name", "age"} and isinstance(value["age"], int) and m.stop_reason == "end_turn"


@pytest.mark.parametrize("kwargs,field", [
    ({"extra_body": {"mcp_servers": [{"type": "url", "url": "https://example.com", "name": "x"}]}}, "mcp_servers"),
    ({"extra_body": {"container": "c1"}}, "container"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools"),
    ({"messages": [{"role": "user", "content": [{"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "AA=="}}]}]}, "messages"),
    ({"messages": [{"role": "user", "content": [{"type": "document", "source": {
        "type": "text", "media_type": "text/plain", "data": "a document"}}]}]}, "messages"),
])
def test_anthropic_fields_that_cannot_be_honoured_are_a_400(claude, kwargs, field):
    kwargs = {"model": "starter", "max_tokens": 2, "messages": HI, **kwargs}
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(**kwargs)
    assert field in str(refused.value), str(refused.value)


# --- Ollama ---------------------------------------------------------------------------------------------
def test_ollama_chat_and_generate_logprobs(oll):
    r = oll.chat(model="starter", messages=HI, options={"num_predict": 5, "temperature": 0}, logprobs=True,
                 top_logprobs=2, stream=False)
    assert len(r.logprobs) == r.eval_count == 5
    assert "".join(t.token for t in r.logprobs) == r.message.content
    assert all(len(t.top_logprobs) == 2 and t.logprob <= t.top_logprobs[0].logprob + 1e-6 for t in r.logprobs)
    parts = list(oll.generate(model="starter", prompt="Count: one, two,", options={"num_predict": 4, "temperature": 0},
                              logprobs=True, stream=True))
    tokens = [t for p in parts for t in p.logprobs or []]
    assert len(tokens) == 4 and "".join(t.token for t in tokens) == "".join(p.response for p in parts)


def test_ollama_streams_each_tool_call_whole_and_one_done_line():
    """Ollama sends a call whole in one chunk (its clients read ``message.tool_calls`` per line), so the
    runtime's argument fragments must not reach an Ollama stream, and only the last line says done."""
    from fireside.engine.server.ollama import NdjsonEncoder
    from fireside.engine.types import Chunk

    parser, encoder = StreamParser(tools=True), NdjsonEncoder("starter", chat=True)
    raw = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    chunks = [c for ch in raw for c in parser.feed(ch)] + list(parser.finish()) + [Chunk("done", finish_reason="tool_calls")]
    lines = [ollama.ChatResponse.model_validate_json(b) for c in chunks for b in encoder.chunk(c)]
    assert [ln.done for ln in lines] == [False, True]
    call = lines[0].message.tool_calls[0].function
    assert (call.name, dict(call.arguments)) == ("get_weather", {"city": "Oslo"})


@pytest.mark.parametrize("kwargs,field", [
    ({"suffix": "end."}, "suffix"), ({"template": "{{ .Prompt }}"}, "template"), ({"context": [1, 2, 3]}, "context"),
    ({"images": ["iVBORw0KGgo="]}, "images"), ({"width": 64, "height": 64}, "width"),
])
def test_ollama_generate_fields_that_cannot_be_honoured_are_a_400(oll, kwargs, field):
    with pytest.raises(ollama.ResponseError) as refused:
        oll.generate(model="starter", prompt="Hi", options={"num_predict": 2}, stream=False, **kwargs)
    assert refused.value.status_code == 400 and field in str(refused.value)


def test_ollama_embed_dimensions_are_refused(oll):
    with pytest.raises(ollama.ResponseError) as refused:
        oll.embed(model="starter", input="hi", dimensions=8)
    assert refused.value.status_code == 400 and "dimensions" in str(refused.value)


@pytest.mark.parametrize("kwargs,field", [
    ({"tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}}, "web_search"),
    ({"background": True}, "background"),
    ({"conversation": "conv_1"}, "conversation"), ({"top_logprobs": 2}, "top_logprobs"),
])
def test_responses_fields_that_cannot_be_honoured_are_a_400(oai, kwargs, field):
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="starter", input="Hi", max_output_tokens=2, **kwargs)
    assert field in str(refused.value), str(refused.value)



def test_responses_stream_a_function_call_and_take_its_output_back(oai):
    tool = {"type": "function", "name": "get_weather", **{k: WEATHER["function"][k] for k in ("description", "parameters")}}
    events = list(oai.responses.create(model="starter", input="What is the weather in Paris, in celsius?",
                                       tools=[tool], tool_choice={"type": "function", "name": "get_weather"},
                                       max_output_tokens=60, temperature=0, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    added = next(e for e in events if e.type == "response.output_item.added")
    assert added.item.type == "function_call" and added.item.name == "get_weather"
    fragments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert len(fragments) >= 4 and "".join(fragments) == done.arguments and set(json.loads(done.arguments)) == {
        "city", "unit"}
    final = events[-1].response
    call = final.output[0]
    assert (call.type, call.id, call.call_id) == ("function_call", added.item.id, added.item.call_id)
    follow = oai.responses.create(model="starter", previous_response_id=final.id, max_output_tokens=8, tools=[tool],
                                  input=[{"type": "function_call_output", "call_id": call.call_id,
                                          "output": "Sunny, 21 C"}], tool_choice="none")
    assert follow.output_text and follow.status in ("completed", "incomplete")


# --- Sampling fields: each changes the reply as the services say ------------------------------------------
STORY = "Write one sentence about a dragon."
HOT = 1.5  # hot enough that a sampled reply leaves the greedy one within a few tokens


def test_chat_temperature_top_p_and_seed(oai):
    def reply(**kwargs):
        return oai.chat.completions.create(model="starter", messages=[{"role": "user", "content": STORY}],
                                           max_tokens=16, **kwargs).choices[0].message.content

    greedy = reply(temperature=0)
    assert reply(temperature=0) == greedy
    hot = reply(temperature=HOT, seed=7)
    assert hot != greedy and reply(temperature=HOT, seed=7) == hot  # a seed repeats a sampled reply
    assert reply(temperature=HOT, seed=7, top_p=0) == greedy  # top_p 0 keeps only the likeliest token


def test_anthropic_temperature_top_p_and_top_k(claude):
    def reply(**kwargs):
        return claude.messages.create(model="starter", max_tokens=16, messages=[{"role": "user", "content": STORY}],
                                      extra_body=kwargs).content[0].text

    greedy = reply(temperature=0)
    assert reply(temperature=0) == greedy
    # Anthropic takes no seed: of three replies at the hottest temperature it allows, one leaves the greedy one
    assert any(reply(temperature=1.0) != greedy for _ in range(3))
    assert reply(temperature=1.0, top_k=1) == greedy and reply(temperature=1.0, top_p=0) == greedy


def test_ollama_sampling_options(oll):
    def reply(**options):
        r = oll.chat(model="starter", messages=[{"role": "user", "content": STORY}], stream=False,
                     options={"num_predict": 16, **options})
        return r.message.content, r

    greedy, r = reply(temperature=0)
    assert r.eval_count == 16 and r.done_reason == "length"
    hot, _ = reply(temperature=HOT, seed=7)
    assert hot != greedy and reply(temperature=HOT, seed=7)[0] == hot
    assert reply(temperature=HOT, seed=7, top_k=1)[0] == greedy
    word = next(w for w in greedy.split()[1:] if len(w) > 2)
    cut, r = reply(temperature=0, stop=[word])
    assert cut == greedy[:greedy.index(word)] and r.done_reason == "stop"


# --- OpenAI completions --------------------------------------------------------------------------------
def test_streamed_completion_sends_text_completion_events_and_usage_last(oai):
    prompt = "The capital of France is"
    whole = oai.completions.create(model="starter", prompt=prompt, max_tokens=6, temperature=0)
    events = list(oai.completions.create(model="starter", prompt=prompt, max_tokens=6, temperature=0, stream=True,
                                         stream_options={"include_usage": True}))
    assert {e.object for e in events} == {"text_completion"}
    pieces = [e.choices[0].text for e in events if e.choices]
    assert len(pieces) > 1 and "".join(pieces) == whole.choices[0].text
    assert [e.choices[0].finish_reason for e in events if e.choices][-1] == "length"
    assert events[-1].choices == [] and events[-1].usage.completion_tokens == 6 == whole.usage.completion_tokens
    assert all(e.usage is None for e in events[:-1])
    plain = list(oai.completions.create(model="starter", prompt=prompt, max_tokens=3, temperature=0, stream=True))
    assert all(e.choices and e.usage is None for e in plain)


def test_completion_sampling_fields(oai):
    def choice(**kwargs):
        return oai.completions.create(model="starter", prompt="Once upon a time", **kwargs).choices[0]

    default = oai.completions.create(model="starter", prompt="Once upon a time", temperature=0)
    assert default.usage.completion_tokens == 16 and default.choices[0].finish_reason == "length"  # OpenAI's default
    greedy = choice(max_tokens=12, temperature=0).text
    hot = choice(max_tokens=12, temperature=HOT, seed=7).text
    assert hot != greedy and choice(max_tokens=12, temperature=HOT, seed=7).text == hot
    assert choice(max_tokens=12, temperature=HOT, seed=7, top_p=0).text == greedy
    word = next(w for w in greedy.split()[1:] if len(w) > 2)
    cut = choice(max_tokens=12, temperature=0, stop=[word])
    assert (cut.text, cut.finish_reason) == (greedy[:greedy.index(word)], "stop")


def test_completion_penalties_cut_repetition(oai):
    prompt = "The cat sat on the mat. The cat sat on the mat. The cat"

    def text(**kwargs):
        return oai.completions.create(model="starter", prompt=prompt, max_tokens=16, temperature=0,
                                      **kwargs).choices[0].text

    plain = text()
    for penalized in (text(frequency_penalty=2.0), text(presence_penalty=2.0)):
        # greedy, the model goes on repeating the sentence; a penalty on tokens already seen breaks the loop
        assert penalized.count("sat on the mat") < plain.count("sat on the mat"), (plain, penalized)


# --- OpenAI Responses ----------------------------------------------------------------------------------
def test_responses_max_output_tokens_cuts_the_reply(oai):
    r = oai.responses.create(model="starter", input="Tell me a long story about a dragon.", max_output_tokens=5,
                             temperature=0)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 5 and r.output_text
    assert [item.status for item in r.output] == ["incomplete"]  # the message the limit cut
    longer = oai.responses.create(model="starter", input="Tell me a long story about a dragon.", max_output_tokens=9,
                                  temperature=0)
    assert longer.usage.output_tokens == 9 and longer.output_text.startswith(r.output_text)
    assert len(longer.output_text) > len(r.output_text)
    with oai.responses.stream(model="starter", input="Tell me a long story about a dragon.", max_output_tokens=5,
                              temperature=0) as events:
        seen = list(events)
    done = [e.item.status for e in seen if e.type == "response.output_item.done"]
    final = seen[-1]  # the stream ends with response.incomplete, not .completed (the SDK's helper wants that)
    assert done == ["incomplete"] and final.type == "response.incomplete"
    assert final.response.status == "incomplete" and final.response.output_text == r.output_text
    whole = oai.responses.create(model="starter", input="Say hi.", max_output_tokens=200, temperature=0)
    assert whole.status == "completed" and [item.status for item in whole.output] == ["completed"]


def test_responses_temperature_and_top_p(oai):
    def text(**kwargs):
        return oai.responses.create(model="starter", input=STORY, max_output_tokens=16, **kwargs).output_text

    greedy = text(temperature=0)
    assert text(temperature=0) == greedy
    # the Responses API takes no seed: of three hot replies, one leaves the greedy one
    assert any(text(temperature=HOT) != greedy for _ in range(3))
    assert text(temperature=HOT, top_p=0) == greedy


PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def test_responses_text_format_json_schema_and_json_object(oai):
    ask = "Invent a person."
    r = oai.responses.create(model="starter", input=ask, max_output_tokens=40, temperature=0, text={"format": {
        "type": "json_schema", "name": "person", "schema": PERSON, "strict": True}})
    value = json.loads(r.output_text)
    assert set(value) == {"name", "age"} and isinstance(value["name"], str) and isinstance(value["age"], int)
    assert r.status == "completed"
    obj = oai.responses.create(model="starter", input="Give the name of a city as JSON.", max_output_tokens=60,
                               temperature=0, text={"format": {"type": "json_object"}})
    assert isinstance(json.loads(obj.output_text), dict) and obj.status == "completed"
    prose = oai.responses.create(model="starter", input=ask, max_output_tokens=12, temperature=0)
    with pytest.raises(json.JSONDecodeError):  # the model's own reply is prose: the format is what made it JSON
        json.loads(prose.output_text)


# --- Ollama generate: raw and system --------------------------------------------------------------------
def test_ollama_generate_raw_skips_the_template_and_system_replaces_its_default(oll, oai):
    prompt = "Roses are red, violets are"
    raw = oll.generate(model="starter", prompt=prompt, raw=True, stream=False, options={"num_predict": 8, **GREEDY})
    assert raw.response == oai.completions.create(model="starter", prompt=prompt, max_tokens=8, temperature=0).choices[0].text
    templated = oll.generate(model="starter", prompt=prompt, stream=False, options={"num_predict": 8, **GREEDY})
    chat = [{"role": "user", "content": prompt}]
    assert templated.response == oai.chat.completions.create(model="starter", messages=chat, max_tokens=8,
                                                             temperature=0).choices[0].message.content
    system = "You answer only in French."
    told = oll.generate(model="starter", prompt=prompt, system=system, stream=False, options={"num_predict": 8, **GREEDY})
    assert told.response == oai.chat.completions.create(
        model="starter", messages=[{"role": "system", "content": system}, *chat], max_tokens=8,
        temperature=0).choices[0].message.content
    assert len({raw.response, templated.response, told.response}) == 3


# --- Ollama legacy embeddings ----------------------------------------------------------------------------
def test_ollama_legacy_embeddings_are_the_embed_vectors(oll, smollm2_path):
    import gguf

    size = int(gguf.GGUFReader(str(smollm2_path)).get_field("llama.embedding_length").contents())
    old = oll.embeddings(model="starter", prompt="The sky is blue.")
    new = oll.embed(model="starter", input="The sky is blue.")
    assert len(old.embedding) == len(new.embeddings[0]) == size
    assert old.embedding == pytest.approx(new.embeddings[0], abs=1e-5)
    other = oll.embeddings(model="starter", prompt="Quantum chromodynamics binds quarks.")
    assert other.embedding != pytest.approx(old.embedding, abs=1e-3)
