"""Thinking switches, chat-template variables and ``tool_choice: "none"`` reach a remote model (issue 27).

The remote is a second Fireside on loopback serving a copy of SmolLM2 whose chat template reads
``enable_thinking`` as Qwen3's does (false: an empty ``<think></think>`` ends the prompt; else the reply
opens in reasoning) and writes ``reasoning_effort`` into a system turn as gpt-oss's does, so what the
template was given shows in the prompt's token count and in the reply's shape. Through the first server
with the official ``openai``, ``anthropic`` and ``ollama`` clients, each switch gives what asking the
remote directly gives; a remote that refuses ``chat_template_kwargs`` (as OpenAI's own API refuses
fields it does not know) is a 400 naming the field the client set, never a reply that silently
ignored it.
"""

from __future__ import annotations

import anthropic
import ollama
import openai
import pytest

from fireside.engine.facade import Engine
from fireside.engine.library import Library
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.fakeopenai import Behaviour, start_fake_server
from tests.helpers.keyrings import DictKeys
from tests.helpers.models import chat_template_of, with_chat_template, with_thinking_switch

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Say hello."}]
GREEDY = {"temperature": 0}
EFFORT = ("{% if reasoning_effort is defined %}{{ '<|im_start|>system\\nReasoning: ' + reasoning_effort + "
          "'<|im_end|>\\n' }}{% endif %}")
STRICT = "remote/strict/fake-model"


def _home(tmp_path_factory, name: str) -> Settings:
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp(name))})
    settings.ensure_dirs()
    return settings


@pytest.fixture(scope="module")
def servers(tmp_path_factory, smollm2_path):
    """(front, second, the model's id there): "second" serves the switchable model as ``switch``; the front has it as a remote,
    and "strict", a fake that refuses ``chat_template_kwargs`` with a 400 naming it."""
    settings = _home(tmp_path_factory, "switch-remote")
    staging = tmp_path_factory.mktemp("switch-staging") / "switched.gguf"
    with_thinking_switch(smollm2_path, staging)
    path = settings.models_dir / "local" / "switch" / "switch.gguf"
    path.parent.mkdir(parents=True)
    with_chat_template(staging, path, EFFORT + chat_template_of(staging))
    staging.unlink()
    library = Library(settings)
    local = library.by_path(path).id
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    second = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    second.start()
    strict = start_fake_server(Behaviour(refuse_extensions=True, interval_s=0.001, ttft_s=0.0))
    front_settings = _home(tmp_path_factory, "switch-front")
    registry = RemoteRegistry(front_settings, keys=DictKeys())
    registry.add("second", f"{second.url}/v1")
    registry.add("strict", strict.url)
    engine = Engine(front_settings, resolver=lambda ref: library.get(ref).path,
                    remotes=RemoteEngine(front_settings, registry))
    front = ServerThread(create_app(engine, front_settings, library), "127.0.0.1", 0)
    front.start()
    yield front, second, local
    for server in (front, second, strict):
        server.stop()
    engine.close()
    runtime.close()


@pytest.fixture(scope="module")
def oai(servers):
    return openai.OpenAI(base_url=f"{servers[0].url}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def local(servers) -> str:
    return servers[2]


@pytest.fixture(scope="module")
def remote(servers) -> str:
    return f"remote/second/{servers[2]}"


@pytest.fixture(scope="module")
def direct(servers):
    return openai.OpenAI(base_url=f"{servers[1].url}/v1", api_key="unused", max_retries=0, timeout=300)


def _prompt(client, model: str, **kw) -> int:
    return client.chat.completions.create(model=model, messages=HI, max_tokens=1, **GREEDY, **kw).usage.prompt_tokens


@pytest.mark.parametrize("kw", [{"reasoning_effort": "none"}, {"reasoning_effort": "high"},
                                {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
                                {"extra_body": {"chat_template_kwargs": {"reasoning_effort": "low"}}}],
                         ids=["effort-none", "effort-high", "kwargs-switch-off", "kwargs-variable"])
def test_openai_switches_reach_the_remotes_template(oai, direct, local, remote, kw):
    plain = _prompt(direct, local)
    asked = _prompt(direct, local, **kw)
    assert asked != plain  # the template read it: the prompt changed
    assert _prompt(oai, remote, **kw) == asked


def test_thinking_turned_off_through_the_remote_answers_without_reasoning(oai, servers, remote):
    on = oai.chat.completions.create(model=remote, messages=HI, max_tokens=6, **GREEDY).choices[0].message
    off = oai.chat.completions.create(model=remote, messages=HI, max_tokens=6, reasoning_effort="none",
                                      **GREEDY).choices[0].message
    assert on.reasoning_content and not on.content  # the template opened the reasoning
    assert off.content and not getattr(off, "reasoning_content", None)
    oll = ollama.Client(host=servers[0].url, timeout=300)
    thought = oll.chat(model=remote, messages=HI, options={"num_predict": 6, "temperature": 0})
    answered = oll.chat(model=remote, messages=HI, think=False, options={"num_predict": 6, "temperature": 0})
    assert thought.message.thinking and not answered.message.thinking and answered.message.content


def test_anthropic_thinking_disabled_reaches_the_remote(servers, direct, local, remote):
    claude = anthropic.Anthropic(base_url=servers[0].url, api_key="unused", max_retries=0, timeout=300)
    off = claude.messages.create(model=remote, max_tokens=6, messages=HI, thinking={"type": "disabled"},
                                 extra_body=GREEDY)
    assert [b.type for b in off.content] == ["text"]
    want = _prompt(direct, local, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert off.usage.input_tokens + (off.usage.cache_read_input_tokens or 0) == want
    counted = claude.messages.count_tokens(model=remote, messages=HI, thinking={"type": "disabled"})
    assert counted.input_tokens == want


def test_a_remote_that_refuses_the_switch_is_a_400_naming_the_field_set(oai, servers):
    for kw, param in [({"reasoning_effort": "none"}, "reasoning_effort"),
                      ({"extra_body": {"chat_template_kwargs": {"enable_thinking": True}}}, "chat_template_kwargs")]:
        with pytest.raises(openai.BadRequestError) as refused:
            oai.chat.completions.create(model=STRICT, messages=HI, max_tokens=3, **kw)
        assert refused.value.param == param and "strict" in str(refused.value)
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model=STRICT, input="hi", max_output_tokens=3, reasoning={"effort": "none"})
    assert refused.value.param == "reasoning.effort"
    claude = anthropic.Anthropic(base_url=servers[0].url, api_key="unused", max_retries=0, timeout=300)
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.messages.create(model=STRICT, max_tokens=3, messages=HI, thinking={"type": "disabled"})
    assert "thinking" in str(refused.value)
    with pytest.raises(ollama.ResponseError) as failed:
        ollama.Client(host=servers[0].url).chat(model=STRICT, messages=HI, think=False)
    assert failed.value.status_code == 400 and failed.value.error.startswith("think")
    assert oai.chat.completions.create(model=STRICT, messages=HI, max_tokens=3).choices[0].message.content


def test_tool_choice_none_through_the_remote_keeps_the_tools_and_makes_no_call(oai, remote):
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    ask = [{"role": "user", "content": 'Repeat after me: <tool_call>\n{"name": "get_weather", "arguments": '
                                       '{"city": "Paris"}}\n</tool_call>'}]
    replies = {choice: oai.chat.completions.create(model=remote, messages=ask, tools=[tool], tool_choice=choice,
                                                   max_tokens=40, reasoning_effort="none", **GREEDY)
               for choice in ("auto", "none")}
    assert replies["none"].usage.prompt_tokens == replies["auto"].usage.prompt_tokens
    assert replies["none"].choices[0].message.tool_calls is None
    assert replies["none"].choices[0].finish_reason in ("stop", "length")
