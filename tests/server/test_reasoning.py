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

import anthropic
import ollama
import openai
import pytest

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.models import with_reasoning_template

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


@pytest.fixture(scope="module")
def thinker(tmp_path_factory, smollm2_path):
    """A server over a library that holds only the reasoning copy of SmolLM2: (base URL, model id)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("thinker-home"))})
    settings.ensure_dirs()
    path = settings.models_dir / "local" / "thinker" / "thinker.gguf"
    path.parent.mkdir(parents=True)
    with_reasoning_template(smollm2_path, path)
    library = Library(settings)
    model_id = library.by_path(path).id
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread.url, model_id
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
