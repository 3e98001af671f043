"""A reasoning model through the official clients of the three dialects, against a real server.

SmolLM2 does not think, so the model here is a copy of its GGUF whose chat template opens the
reasoning at the generation prompt (``<|im_start|>assistant\\n<think>\\n``), as DeepSeek-R1's and
Qwen3's templates do: the model's first token is already reasoning, and it stays reasoning until the
model writes ``</think>``. Two conversations steer a 135M model into the two shapes that matter,
decoded greedily so each comes out the same every run: ``CLOSES`` shows it two earlier turns that
think, close with ``</think>`` and answer, so it does the same; ``NEVER_CLOSES`` is one plain question,
which it answers without ever closing its thinking, so all of that reply is reasoning. The tests
assert the reply's structure (which part is reasoning, which is the answer, no marker leaking into
either), never what the model wrote.
"""

from __future__ import annotations

import json
from typing import get_args

import anthropic
import ollama
import openai
import pytest
from openai.types.responses import ResponseStreamEvent

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest
from tests.helpers.models import (
    chat_template_of,
    with_chat_template,
    with_reasoning_template,
    with_thinking_switch,
)

pytestmark = pytest.mark.model


def _turn(question: str, thought: str, answer: str) -> list[dict]:
    return [{"role": "user", "content": question},
            {"role": "assistant", "content": f"<think>\n{thought}\n</think>\n\n{answer}"}]


# the thoughts spell numbers out, so the answer's digit is not a token the repeat penalty has seen: greedy
# picks it by a wide margin, and a prompt evaluated afresh or taken from the cache decodes the same reply
CLOSES = [*_turn("What is 1+1?", "One and one make two.", "2"), *_turn("What is 3+3?", "Three and three make six.", "6"),
          {"role": "user", "content": "What is 2+2?"}]
NEVER_CLOSES = [{"role": "user", "content": "Say hello."}]
GREEDY = {"temperature": 0}
MARKERS = ("<think>", "</think>")
# gpt-oss's template writes the effort into its system message; this one does the same, before SmolLM2's own
EFFORT = ("{% if reasoning_effort is defined %}{{ '<|im_start|>system\\nReasoning: ' + reasoning_effort + "
          "'<|im_end|>\\n' }}{% endif %}")


@pytest.fixture(scope="module")
def thinker(tmp_path_factory, smollm2_path):
    """A server over a library that holds three copies of SmolLM2: one whose template always opens the
    reasoning, one whose template reads ``enable_thinking`` as Qwen3's does, and one whose template writes
    ``reasoning_effort`` into a system turn, as gpt-oss's does: (base URL, model id, switchable model id,
    the runtime, effort model id)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("thinker-home"))})
    settings.ensure_dirs()
    path = settings.models_dir / "local" / "thinker" / "thinker.gguf"
    switch_path = settings.models_dir / "local" / "switch" / "switch.gguf"
    effort_path = settings.models_dir / "local" / "effort" / "effort.gguf"
    for p in (path, switch_path, effort_path):
        p.parent.mkdir(parents=True)
    with_reasoning_template(smollm2_path, path)
    with_thinking_switch(smollm2_path, switch_path)
    with_chat_template(smollm2_path, effort_path, EFFORT + chat_template_of(smollm2_path))
    library = Library(settings)
    model_id, switch_id = library.by_path(path).id, library.by_path(switch_path).id
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread.url, model_id, switch_id, runtime, library.by_path(effort_path).id
    thread.stop()
    runtime.close()


@pytest.fixture(scope="module")
def oai(thinker):
    return openai.OpenAI(base_url=f"{thinker[0]}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def claude(thinker):
    return anthropic.Anthropic(base_url=thinker[0], api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def oll(thinker):
    return ollama.Client(host=thinker[0], timeout=300)


@pytest.fixture(scope="module")
def model(thinker):
    return thinker[1]


def clean(*texts: str) -> bool:
    return all(texts) and not any(m in t for t in texts for m in MARKERS)


# --- OpenAI chat: reasoning_content, as llama-server and DeepSeek send it ---------------------------------
def test_openai_chat_sends_the_reasoning_apart_from_the_answer(oai, model):
    r = oai.chat.completions.create(model=model, messages=CLOSES, max_tokens=24, seed=1, **GREEDY)
    message = r.choices[0].message
    assert clean(message.reasoning_content, message.content), message
    assert r.choices[0].finish_reason == "stop"
    events = [e for e in oai.chat.completions.create(model=model, messages=CLOSES, max_tokens=24, seed=1, stream=True,
                                                      **GREEDY) if e.choices]
    kinds = [("reasoning" if getattr(e.choices[0].delta, "reasoning_content", None) else "text")
             for e in events if getattr(e.choices[0].delta, "reasoning_content", None) or e.choices[0].delta.content]
    assert kinds == sorted(kinds) and kinds[0] == "reasoning" and kinds[-1] == "text"  # reasoning first, then the answer
    assert "".join(getattr(e.choices[0].delta, "reasoning_content", None) or "" for e in events) == message.reasoning_content
    assert "".join(e.choices[0].delta.content or "" for e in events) == message.content


def test_a_reply_that_never_closes_its_thinking_is_all_reasoning(oai, model):
    r = oai.chat.completions.create(model=model, messages=NEVER_CLOSES, max_tokens=8, **GREEDY)
    message = r.choices[0].message
    assert clean(message.reasoning_content) and not message.content
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 8


def test_a_json_schema_reply_is_the_answer_not_reasoning(oai, model):
    """The grammar holds the reply to JSON from its first token, so nothing in it is reasoning, though the
    prompt opened some."""
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}
    r = oai.chat.completions.create(model=model, messages=CLOSES, max_tokens=24, **GREEDY, response_format={
        "type": "json_schema", "json_schema": {"name": "sum", "schema": schema, "strict": True}})
    message = r.choices[0].message
    assert isinstance(json.loads(message.content)["answer"], int)
    assert not getattr(message, "reasoning_content", None)


# --- Anthropic: thinking blocks -----------------------------------------------------------------------
def test_anthropic_message_has_a_thinking_block_then_the_text(claude, model):
    m = claude.messages.create(model=model, max_tokens=24, messages=CLOSES, extra_body=GREEDY)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert clean(m.content[0].thinking, m.content[1].text) and m.stop_reason == "end_turn"
    cut = claude.messages.create(model=model, max_tokens=8, messages=NEVER_CLOSES, extra_body=GREEDY)
    assert [b.type for b in cut.content] == ["thinking"] and cut.stop_reason == "max_tokens"


def test_anthropic_stream_sends_thinking_deltas_then_a_text_block(claude, model):
    whole = claude.messages.create(model=model, max_tokens=24, messages=CLOSES, extra_body=GREEDY)
    with claude.messages.stream(model=model, max_tokens=24, messages=CLOSES, extra_body=GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_message()
    starts = [(e.index, e.content_block.type) for e in events if e.type == "content_block_start"]
    assert starts == [(0, "thinking"), (1, "text")]
    thinking = [e.delta.thinking for e in events if e.type == "content_block_delta" and e.delta.type == "thinking_delta"]
    assert len(thinking) > 1 and "".join(thinking) == whole.content[0].thinking
    assert all(e.index == 0 for e in events if e.type == "content_block_delta" and e.delta.type == "thinking_delta")
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert (final.content[0].thinking, final.content[1].text) == (whole.content[0].thinking, whole.content[1].text)


# --- Ollama: message.thinking, and think=false --------------------------------------------------------
@pytest.mark.parametrize("think", [True, None])
def test_ollama_chat_puts_the_reasoning_in_thinking(oll, model, think):
    r = oll.chat(model=model, messages=CLOSES, think=think, stream=False, options={"num_predict": 24, **GREEDY})
    assert clean(r.message.thinking, r.message.content), r.message
    parts = list(oll.chat(model=model, messages=CLOSES, think=think, stream=True,
                          options={"num_predict": 24, **GREEDY}))
    assert "".join(p.message.thinking or "" for p in parts) == r.message.thinking
    assert "".join(p.message.content for p in parts) == r.message.content


def test_ollama_think_false_keeps_everything_in_content(oll, model):
    thought = oll.chat(model=model, messages=CLOSES, stream=False, options={"num_predict": 24, **GREEDY})
    r = oll.chat(model=model, messages=CLOSES, think=False, stream=False, options={"num_predict": 24, **GREEDY})
    assert not r.message.thinking
    assert thought.message.thinking.strip() in r.message.content and "</think>" in r.message.content
    assert r.message.content.rstrip().endswith(thought.message.content.strip())


def test_ollama_generate_thinks_too(oll, model):
    r = oll.generate(model=model, prompt="Say hello.", stream=False, options={"num_predict": 8, **GREEDY})
    assert clean(r.thinking) and not r.response
    plain = oll.generate(model=model, prompt="Say hello.", think=False, stream=False,
                         options={"num_predict": 8, **GREEDY})
    assert not plain.thinking and plain.response == r.thinking


# --- Responses API: a reasoning item before the message ------------------------------------------------
def _item_texts(output) -> dict[str, str]:
    return {o.type: "".join(c.text for c in (o.content or [])) for o in output if o.type in ("reasoning", "message")}


def test_responses_output_has_the_reasoning_item_then_the_message(oai, model):
    chat = oai.chat.completions.create(model=model, messages=CLOSES, max_tokens=24, **GREEDY)
    r = oai.responses.create(model=model, input=CLOSES, max_output_tokens=24, **GREEDY)
    assert [o.type for o in r.output] == ["reasoning", "message"]
    assert r.output[0].content[0].type == "reasoning_text" and r.output[0].summary == []
    texts = _item_texts(r.output)
    assert clean(texts["reasoning"], texts["message"]) and r.output_text == texts["message"]
    assert (texts["reasoning"], texts["message"]) == (chat.choices[0].message.reasoning_content,
                                                      chat.choices[0].message.content)  # the same greedy reply
    reasoning = r.usage.output_tokens_details.reasoning_tokens
    assert 0 < reasoning < r.usage.output_tokens
    assert reasoning == chat.usage.completion_tokens_details.reasoning_tokens


def test_responses_reasoning_tokens_count_a_reply_that_never_stops_thinking(oai, model):
    r = oai.responses.create(model=model, input=NEVER_CLOSES, max_output_tokens=8, **GREEDY)
    assert [o.type for o in r.output] == ["reasoning"] and r.status == "incomplete"
    assert r.usage.output_tokens == r.usage.output_tokens_details.reasoning_tokens == 8


# each streamed event's own class in the openai package, by its ``type``
EVENT_TYPES = {get_args(cls.model_fields["type"].annotation)[0]: cls
               for cls in get_args(get_args(ResponseStreamEvent)[0])}


def _runs(kinds: list[str]) -> list[str]:
    return [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]


def test_responses_stream_sends_the_reasoning_item_as_its_own_events(oai, model):
    whole = oai.responses.create(model=model, input=CLOSES, max_output_tokens=24, **GREEDY)
    raw = list(oai.responses.create(model=model, input=CLOSES, max_output_tokens=24, stream=True, **GREEDY))
    events = [EVENT_TYPES[e.type].model_validate(e.to_dict()) for e in raw]  # strictly, by the client's own types
    assert _runs([e.type for e in events]) == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added", "response.reasoning_text.delta",
        "response.reasoning_text.done", "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added", "response.output_text.delta",
        "response.output_text.done", "response.content_part.done", "response.output_item.done",
        "response.completed"]
    assert [e.sequence_number for e in events] == sorted({e.sequence_number for e in events})
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [(e.output_index, e.item.type) for e in added] == [(0, "reasoning"), (1, "message")]
    deltas = [e for e in events if e.type == "response.reasoning_text.delta"]
    assert len(deltas) > 1 and {(e.item_id, e.output_index) for e in deltas} == {(added[0].item.id, 0)}
    texts = _item_texts(whole.output)
    assert "".join(e.delta for e in deltas) == texts["reasoning"]
    assert next(e.text for e in events if e.type == "response.reasoning_text.done") == texts["reasoning"]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == texts["message"]
    final = events[-1].response
    assert [o.type for o in final.output] == ["reasoning", "message"] and _item_texts(final.output) == texts
    assert final.usage.output_tokens_details.reasoning_tokens == whole.usage.output_tokens_details.reasoning_tokens


def test_responses_stream_helper_accumulates_the_reasoning_item(oai, model):
    with oai.responses.stream(model=model, input=CLOSES, max_output_tokens=24, **GREEDY) as stream:
        final = stream.get_final_response()  # the helper checks each item's identity from added to done
    assert [o.type for o in final.output] == ["reasoning", "message"]
    assert clean(*_item_texts(final.output).values())


def test_a_reasoning_item_in_a_later_turns_input_is_left_out_of_the_prompt(oai, model):
    first = oai.responses.create(model=model, input=CLOSES, max_output_tokens=24, **GREEDY)
    follow = {"role": "user", "content": "And 4+4?"}
    echoed = [o.to_dict() for o in first.output]  # the output fed back as is, reasoning item first
    assert echoed[0]["type"] == "reasoning"
    with_it = oai.responses.create(model=model, input=[*CLOSES, *echoed, follow], max_output_tokens=1, **GREEDY)
    without = oai.responses.create(model=model, input=[*CLOSES, *echoed[1:], follow], max_output_tokens=1, **GREEDY)
    assert with_it.usage.input_tokens == without.usage.input_tokens
    later = oai.responses.create(model=model, input=[follow], previous_response_id=first.id, max_output_tokens=1,
                                 **GREEDY)
    assert later.usage.input_tokens == without.usage.input_tokens  # the stored turn keeps no reasoning either


# --- turning thinking off: enable_thinking reaches a template that reads it ---------------------------
OFF = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module")
def switch(thinker):
    return thinker[2]


@pytest.fixture(scope="module")
def prompt_tokens(thinker, switch):
    """The switchable model's prompt tokens for CLOSES, by enable_thinking (False, True, None)."""
    runtime = thinker[3]
    prompts = {v: runtime.render_prompt(switch, ChatRequest(messages=CLOSES, enable_thinking=v))
               for v in (False, True, None)}
    assert prompts[False].endswith(OFF) and prompts[True] == prompts[None] and prompts[True].endswith("<think>\n")
    return {v: runtime.count_chat_tokens(switch, ChatRequest(messages=CLOSES, enable_thinking=v))
            for v in (False, True, None)}


def test_chat_template_kwargs_reach_the_template(oai, switch, prompt_tokens, thinker):
    """vLLM's and llama-server's ``chat_template_kwargs``: its ``enable_thinking`` is Qwen3's switch, its other
    keys are the template's variables; ``reasoning_effort`` reaches a template that reads it (gpt-oss's)."""
    effort = thinker[4]

    def ask(model, **kwargs):
        return oai.chat.completions.create(model=model, messages=CLOSES, max_tokens=8, **GREEDY, **kwargs)

    off = ask(switch, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert not getattr(off.choices[0].message, "reasoning_content", None) and off.usage.prompt_tokens == prompt_tokens[False]
    # the kwargs' switch wins over the effort, as in vLLM
    assert ask(switch, reasoning_effort="high", extra_body={"chat_template_kwargs": {"enable_thinking": False}}
               ).usage.prompt_tokens == prompt_tokens[False]
    plain = ask(effort).usage.prompt_tokens
    high = ask(effort, reasoning_effort="high").usage.prompt_tokens
    assert high > plain  # the system turn "Reasoning: high" is in the prompt
    assert ask(effort, extra_body={"chat_template_kwargs": {"reasoning_effort": "high"}}).usage.prompt_tokens == high
    assert ask(effort, reasoning_effort="none").usage.prompt_tokens == plain  # none is no level to write
    longer = ask(effort, extra_body={"chat_template_kwargs": {"reasoning_effort": "high, and check every step twice"}})
    assert longer.usage.prompt_tokens > high
    for kwargs, field in [({"messages": []}, "chat_template_kwargs.messages"),
                          ({"enable_thinking": "no"}, "chat_template_kwargs.enable_thinking")]:
        with pytest.raises(openai.BadRequestError) as bad:
            ask(effort, extra_body={"chat_template_kwargs": kwargs})
        assert bad.value.param == field, str(bad.value)


def test_openai_reasoning_effort_none_turns_thinking_off(oai, switch, prompt_tokens):
    def ask(**kwargs):
        return oai.chat.completions.create(model=switch, messages=CLOSES, max_tokens=24, **GREEDY, **kwargs)

    off = ask(reasoning_effort="none")
    assert not getattr(off.choices[0].message, "reasoning_content", None) and clean(off.choices[0].message.content)
    assert off.usage.prompt_tokens == prompt_tokens[False] and off.usage.completion_tokens_details.reasoning_tokens == 0
    on = ask(reasoning_effort="high")
    assert clean(on.choices[0].message.reasoning_content) and on.usage.prompt_tokens == prompt_tokens[True]
    default = ask()
    assert default.usage.prompt_tokens == prompt_tokens[None]
    assert default.choices[0].message.reasoning_content == on.choices[0].message.reasoning_content
    with pytest.raises(openai.BadRequestError) as bad:
        ask(reasoning_effort="extreme")
    assert "reasoning_effort" in str(bad.value)


def test_anthropic_thinking_disabled_has_no_thinking_block(claude, switch, prompt_tokens):
    def ask(**kwargs):
        return claude.messages.create(model=switch, max_tokens=24, messages=CLOSES, extra_body=GREEDY, **kwargs)

    off = ask(thinking={"type": "disabled"})
    assert [b.type for b in off.content] == ["text"] and clean(off.content[0].text)
    assert off.usage.input_tokens + off.usage.cache_read_input_tokens == prompt_tokens[False]
    on = ask(thinking={"type": "enabled", "budget_tokens": 1024})
    assert [b.type for b in on.content] == ["thinking", "text"]
    counted = claude.messages.count_tokens(model=switch, messages=CLOSES, thinking={"type": "disabled"})
    assert counted.input_tokens == prompt_tokens[False]
    with claude.messages.stream(model=switch, max_tokens=24, messages=CLOSES, extra_body=GREEDY,
                                thinking={"type": "disabled"}) as stream:
        streamed = stream.get_final_message()
    assert [b.type for b in streamed.content] == ["text"] and streamed.content[0].text == off.content[0].text


def test_ollama_think_false_on_a_template_that_reads_it_answers_without_thinking(oll, switch):
    off = oll.chat(model=switch, messages=CLOSES, think=False, stream=False, options={"num_predict": 24, **GREEDY})
    assert not off.message.thinking and clean(off.message.content)  # no reasoning at all, not reasoning kept as text
    parts = list(oll.chat(model=switch, messages=CLOSES, think=False, stream=True,
                          options={"num_predict": 24, **GREEDY}))
    assert not any(p.message.thinking for p in parts) and "".join(p.message.content for p in parts) == off.message.content
    on = oll.chat(model=switch, messages=CLOSES, think=True, stream=False, options={"num_predict": 24, **GREEDY})
    assert clean(on.message.thinking, on.message.content)
    plain = oll.generate(model=switch, prompt="Say hello.", think=False, stream=False,
                         options={"num_predict": 8, **GREEDY})
    assert not plain.thinking and clean(plain.response)


def test_responses_reasoning_effort_none_has_no_reasoning_item(oai, switch, prompt_tokens):
    off = oai.responses.create(model=switch, input=CLOSES, max_output_tokens=24, reasoning={"effort": "none"},
                               **GREEDY)
    assert [o.type for o in off.output] == ["message"] and clean(off.output_text)
    assert off.usage.input_tokens == prompt_tokens[False] and off.usage.output_tokens_details.reasoning_tokens == 0
    on = oai.responses.create(model=switch, input=CLOSES, max_output_tokens=24, reasoning={"effort": "low"}, **GREEDY)
    assert [o.type for o in on.output] == ["reasoning", "message"] and on.usage.input_tokens == prompt_tokens[True]
