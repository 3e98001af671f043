"""The conformance matrix's former "Known gaps", each through the official client of its dialect against
the real server and SmolLM2: Ollama's sampling options (Mirostat, typical-p, the penalties' window
and the rest), the Responses API's ``parallel_tool_calls``, ``max_tool_calls``, ``truncation`` and
``include`` (log-probabilities on ``output_text``), and log-probabilities and stop sequences through
a remote engine."""

from __future__ import annotations

import math

import anthropic
import ollama
import openai
import pytest

from fireside.engine.facade import Engine
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.server.context import ServerContext
from fireside.engine.server.responses import ResponsesBody, chat_request, truncated
from fireside.engine.settings import Settings
from tests.helpers.fakeopenai import Behaviour, start_fake_server, token_logprob
from tests.helpers.keyrings import DictKeys

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Say hello."}]
STORY = [{"role": "user", "content": "Write a short story about a dragon."}]
HOT = {"temperature": 1.5, "num_predict": 16}  # varied enough that three seeds give three replies


@pytest.fixture(scope="module")
def oll(base_url):
    return ollama.Client(host=base_url, timeout=300)


def _text(oll, messages=STORY, **options) -> str:
    return oll.chat(model="starter", messages=messages, options=options, stream=False).message.content


# --- Ollama options --------------------------------------------------------------------------------------
def _seeded(oll, **options) -> set[str]:
    return {_text(oll, **HOT, **options, seed=seed) for seed in (1, 2, 3)}


@pytest.fixture(scope="module")
def greedy_story(oll) -> str:
    return _text(oll, temperature=0, num_predict=16)


def test_hot_sampling_varies_with_the_seed(oll):
    """The baseline the truncating options below are measured against: without them, three seeds at
    temperature 1.5 give three different replies."""
    assert len(_seeded(oll)) == 3


@pytest.mark.parametrize("options", [
    {"mirostat": 2, "mirostat_tau": 0.001},  # v2 keeps the tokens whose surprise is under mu = 2 tau: only the top one
    {"min_p": 1.0},  # only tokens as likely as the most likely one
    {"top_k": 1},
], ids=["mirostat_v2", "min_p", "top_k"])
def test_options_that_keep_only_the_top_token_sample_the_greedy_reply(oll, greedy_story, options):
    assert _seeded(oll, **options) == {greedy_story}


def test_typical_p_keeps_one_token_a_step(oll):
    """typical_p near 0 keeps the one token whose surprise is nearest the entropy (not always the most
    likely one): any seed then gives one and the same reply."""
    assert len(_seeded(oll, typical_p=0.0001)) == 1


def test_mirostat_v1_samples_with_its_own_target(oll):
    """Mirostat replaces top-k, top-p and min-p: with top_k 1 alone the reply is greedy, but with
    mirostat 1 and a high target surprise the same seeds sample varied text again."""
    assert len(_seeded(oll, top_k=1, mirostat=1, mirostat_tau=10.0)) > 1


def test_repeat_last_n_sets_the_window_the_penalties_see(oll):
    la = [{"role": "user", "content": "Repeat after me: la la la la la la"}]
    plain = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0)
    penalized = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0)
    assert penalized != plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0, repeat_last_n=0) == plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0, repeat_last_n=-1) == penalized
    # a window past the context is the context (llama.cpp would allocate a ring of 2**31 tokens)
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=2.0, repeat_last_n=2**31 - 1) == penalized


def test_seed_num_predict_and_stop_are_honoured(oll):
    a = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7}, stream=False)
    b = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7}, stream=False)
    assert a.message.content == b.message.content and a.eval_count == 16 and a.done_reason == "length"
    word = next(w for w in a.message.content.split()[1:] if len(w) > 2)
    cut = oll.chat(model="starter", messages=STORY, options={**HOT, "seed": 7, "stop": [word]}, stream=False)
    assert cut.message.content == a.message.content[:a.message.content.index(word)] and cut.done_reason == "stop"


def test_presence_and_frequency_penalties_change_the_reply(oll):
    la = [{"role": "user", "content": "Repeat after me: la la la la la la"}]
    plain = _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0)
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0, presence_penalty=2.0) != plain
    assert _text(oll, la, temperature=0, num_predict=16, repeat_penalty=1.0, frequency_penalty=2.0) != plain


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 0.9, "seed": 5}])
def test_penalties_applied_here_sample_exactly_as_llama_cpps_own(oll, sampling):
    """Windows up to 256 tokens are penalized by Fireside's own code (engine/runner/sampler.py),
    longer ones by llama.cpp's sampler. A 48-token reply never fills a 64-token window, so both give
    the same reply, token for token, with the same log-probabilities (the model's, not the
    penalized ones: the logits row is put back)."""
    penalties = {"repeat_penalty": 1.3, "frequency_penalty": 0.4, "presence_penalty": 0.3}

    def reply(**options):
        r = oll.chat(model="starter", messages=STORY, options={**sampling, "num_predict": 48, **options},
                     logprobs=True, top_logprobs=3, stream=False)
        return r.message.content, [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs])
                                   for t in r.logprobs]

    own = reply(**penalties, repeat_last_n=64)
    native = reply(**penalties, repeat_last_n=1000)
    assert own == native
    assert own[0] != reply(repeat_penalty=1.0)[0]  # the penalties did change the reply


@pytest.mark.parametrize("options,field", [
    ({"mirostat": 3}, "mirostat"), ({"mirostat_tau": "high"}, "mirostat_tau"), ({"mirostat_eta": -1}, "mirostat_eta"),
    ({"typical_p": 2}, "typical_p"), ({"repeat_last_n": -2}, "repeat_last_n"),
])
def test_bad_sampling_options_are_a_400_naming_them(oll, options, field):
    with pytest.raises(ollama.ResponseError) as refused:
        oll.chat(model="starter", messages=HI, options=options, stream=False)
    assert refused.value.status_code == 400 and field in str(refused.value)


# --- Responses API -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_responses_include_output_text_logprobs(oai):
    r = oai.responses.create(model="starter", input="Say hello.", max_output_tokens=6, temperature=0,
                             include=["message.output_text.logprobs"], top_logprobs=2)
    part = r.output[0].content[0]
    assert len(part.logprobs) == r.usage.output_tokens == 6
    assert "".join(t.token for t in part.logprobs) == part.text == r.output_text
    for t in part.logprobs:
        assert t.logprob <= 0 and t.bytes == list(t.token.encode()) and len(t.top_logprobs) == 2
        assert t.logprob <= t.top_logprobs[0].logprob + 1e-6
    plain = oai.responses.create(model="starter", input="Say hello.", max_output_tokens=6, temperature=0,
                                 include=["reasoning.encrypted_content"])  # an include that changes nothing here
    assert plain.output[0].content[0].logprobs is None and plain.output_text == r.output_text


def test_streamed_responses_carry_logprobs_on_every_text_delta(oai):
    events = list(oai.responses.create(model="starter", input="Say hello.", max_output_tokens=6, temperature=0,
                                       include=["message.output_text.logprobs"], stream=True))
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    tokens = [t.token for e in deltas for t in e.logprobs]
    assert len(tokens) == 6 and "".join(tokens) == "".join(e.delta for e in deltas)
    final = events[-1].response.output[0].content[0]
    assert [t.token for t in final.logprobs] == tokens


def test_responses_reasoning_is_accepted_and_changes_nothing(oai):
    def text(**kwargs):
        return oai.responses.create(model="starter", input="Say hello.", max_output_tokens=4, temperature=0,
                                    **kwargs).output_text

    assert text(reasoning={"effort": "low", "summary": "auto"}) == text()


def test_max_tool_calls_zero_cannot_be_combined_with_a_forced_call(oai):
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="starter", input="Hi", tools=[tool], tool_choice="required", max_tool_calls=0)
    assert refused.value.param == "max_tool_calls"


@pytest.fixture(scope="module")
def small(server_settings, library):
    """A runtime that loads the starter with a 1,024-token context (a prompt past it evaluates in seconds,
    not minutes), a server over it, and what ``/v1/responses`` works with: (server, ctx, model id, n_ctx)."""
    rt = Runtime(server_settings, resolver=lambda ref: library.get(ref).path,
                 load_defaults=LoadOptions(context=1024, parallel=1))
    thread = ServerThread(create_app(rt, server_settings, library), "127.0.0.1", 0)
    thread.start()
    model_id = library.get("starter").id
    yield thread, ServerContext(Engine.of(rt, server_settings), server_settings, library, None), model_id, \
        rt.load(model_id).n_ctx
    thread.stop()
    rt.close()


def _filler(n_ctx: int) -> list[dict]:
    """Input items that add up to well past a context of ``n_ctx`` tokens (about n_ctx / 4 each)."""
    words = " ".join(f"word{i}" for i in range(n_ctx // 12))  # "word123" is about 3 tokens
    return [{"type": "message", "role": "user" if i % 2 == 0 else "assistant", "content": f"Note {i}: {words}"}
            for i in range(8)]


def test_truncation_auto_drops_the_oldest_items_and_keeps_the_instructions(small):
    _, ctx, model_id, n_ctx = small
    items = [*_filler(n_ctx), {"type": "message", "role": "user", "content": "Say hello."}]
    body = ResponsesBody(model="starter", input=items, instructions="Be brief.", truncation="auto",
                         max_output_tokens=16)
    req = chat_request(body, [{"role": "system", "content": "Be brief."}] + [
        {"role": i["role"], "content": i["content"]} for i in items])
    assert ctx.engine.count_chat_tokens(model_id, req) > n_ctx
    kept = truncated(ctx, model_id, req, body)
    assert kept.messages[0] == {"role": "system", "content": "Be brief."}
    assert kept.messages[-1]["content"] == "Say hello."
    assert 2 < len(kept.messages) < len(req.messages)
    assert kept.messages[1:] == req.messages[len(req.messages) - len(kept.messages) + 1:]  # the newest items
    assert ctx.engine.count_chat_tokens(model_id, kept) <= n_ctx - 16
    one_more = kept.messages[:1] + req.messages[len(req.messages) - len(kept.messages):]
    assert ctx.engine.count_chat_tokens(model_id, type(req)(messages=one_more)) > n_ctx - 16  # as few dropped as can be


def test_truncation_disabled_is_a_400_and_auto_answers(small):
    oai = openai.OpenAI(base_url=f"{small[0].url}/v1", api_key="unused", max_retries=0, timeout=300)
    n_ctx = small[3]
    items = [*_filler(n_ctx), {"type": "message", "role": "user", "content": "Say hello."}]
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="starter", input=items, max_output_tokens=4)
    assert refused.value.code == "context_length_exceeded"
    r = oai.responses.create(model="starter", input=items, max_output_tokens=4, truncation="auto", instructions="Be brief.")
    assert r.truncation == "auto" and r.output_text and 0 < r.usage.input_tokens <= n_ctx - 4
    assert n_ctx == 1024


# --- remote engines ---------------------------------------------------------------------------------------
REMOTE_KEY = "remote-key-0123456789"


@pytest.fixture(scope="module")
def remotes(runtime, server_settings, library, tmp_path_factory):
    """A front server whose remotes are: "second", a Fireside over the session's runtime (real logprobs,
    and it says which stop string ended a reply); "calls", an OpenAI-shaped fake whose replies are two
    function calls; "plain", a fake that ignores logprobs and reports stops only as finish_reason "stop";
    "scored", a fake that speaks logprobs as OpenAI does."""
    second = ServerThread(create_app(runtime, server_settings, library), "127.0.0.1", 0)
    second.start()
    fakes = {"calls": start_fake_server(Behaviour(tool_calls=2, interval_s=0.001, ttft_s=0.0)),
             "plain": start_fake_server(Behaviour(stop_after=3, interval_s=0.001, ttft_s=0.0)),
             "scored": start_fake_server(Behaviour(logprobs=True, interval_s=0.001, ttft_s=0.0))}
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("gaps-front"))})
    settings.ensure_dirs()
    registry = RemoteRegistry(settings, keys=DictKeys())
    registry.add("second", f"{second.url}/v1")
    for name, fake in fakes.items():
        registry.add(name, fake.url)
    engine = Engine(settings, resolver=lambda ref: library.get(ref).path, remotes=RemoteEngine(settings, registry))
    front = ServerThread(create_app(engine, settings, library), "127.0.0.1", 0)
    front.start()
    yield front, second
    front.stop()
    engine.close()
    for server in [second, *fakes.values()]:
        server.stop()


@pytest.fixture(scope="module")
def front_oai(remotes):
    return openai.OpenAI(base_url=f"{remotes[0].url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_parallel_tool_calls_false_and_max_tool_calls_cap_a_responses_reply(front_oai):
    tools = [{"type": "function", "name": f"tool_{i}", "parameters": {"type": "object"}} for i in range(2)]

    def calls(**kwargs):
        r = front_oai.responses.create(model="remote/calls/fake-model", input="Call both tools.", tools=tools, **kwargs)
        return [(item.name, item.arguments) for item in r.output if item.type == "function_call"], r

    both, r = calls()
    assert both == [("tool_0", '{"n": 0}'), ("tool_1", '{"n": 1}')] and r.parallel_tool_calls is True
    one, r = calls(parallel_tool_calls=False)
    assert one == both[:1] and r.parallel_tool_calls is False
    assert calls(max_tool_calls=1)[0] == both[:1]
    assert calls(max_tool_calls=0)[0] == []
    events = list(front_oai.responses.create(model="remote/calls/fake-model", input="Call both tools.", tools=tools,
                                             parallel_tool_calls=False, stream=True))
    added = [e.item.name for e in events if e.type == "response.output_item.added"]
    assert added == ["tool_0"] and [i.name for i in events[-1].response.output] == ["tool_0"]


def test_logprobs_come_through_a_remote_as_the_remote_gave_them(remotes, front_oai):
    direct = openai.OpenAI(base_url=f"{remotes[1].url}/v1", api_key="unused", max_retries=0, timeout=300)
    kwargs = {"messages": HI, "max_tokens": 5, "temperature": 0, "logprobs": True, "top_logprobs": 2}
    want = direct.chat.completions.create(model="starter", **kwargs).choices[0].logprobs.content
    got = front_oai.chat.completions.create(model="remote/second/starter", **kwargs).choices[0].logprobs.content
    assert [t.token for t in got] == [t.token for t in want] and len(got) == 5
    # the same greedy tokens; their values may move a little with what else the runner decodes
    assert all(math.isclose(g.logprob, w.logprob, abs_tol=0.05) and len(g.top_logprobs) == 2 for g, w in zip(got, want))
    text = front_oai.completions.create(model="remote/second/starter", prompt="The capital of France is", max_tokens=4,
                                        temperature=0, logprobs=2).choices[0]
    assert len(text.logprobs.tokens) == 4 and "".join(text.logprobs.tokens) == text.text
    assert all(len(top) == 2 for top in text.logprobs.top_logprobs)


def test_a_remote_speaking_openai_logprobs_is_mapped_exactly(front_oai):
    r = front_oai.chat.completions.create(model="remote/scored/fake-model", messages=HI, max_tokens=3, logprobs=True,
                                          top_logprobs=2)
    content = r.choices[0].logprobs.content
    assert [(t.token, t.logprob) for t in content] == [(f" t{i}", token_logprob(i)) for i in range(3)]
    assert [[a.token for a in t.top_logprobs] for t in content] == [[" alt0", " alt1"]] * 3


def test_a_remote_that_ignores_logprobs_is_a_400_naming_them(front_oai):
    with pytest.raises(openai.BadRequestError) as refused:
        front_oai.chat.completions.create(model="remote/plain/fake-model", messages=HI, max_tokens=3, logprobs=True)
    assert refused.value.param == "logprobs" and "plain" in str(refused.value)
    plain = front_oai.chat.completions.create(model="remote/plain/fake-model", messages=HI, max_tokens=3)
    assert plain.choices[0].logprobs is None and plain.choices[0].message.content


def test_a_stop_sequence_through_a_remote_names_itself_when_the_remote_says(remotes):
    claude = anthropic.Anthropic(base_url=remotes[0].url, api_key="unused", max_retries=0, timeout=300)
    greedy = {"temperature": 0}
    free = claude.messages.create(model="remote/second/starter", max_tokens=12, messages=HI, extra_body=greedy)
    text = free.content[0].text
    word = next(w for w in text.split()[1:] if len(w) > 2)
    m = claude.messages.create(model="remote/second/starter", max_tokens=12, messages=HI, extra_body=greedy,
                               stop_sequences=["zzz-never", word])
    assert (m.stop_reason, m.stop_sequence) == ("stop_sequence", word) and m.content[0].text == text[:text.index(word)]
    with claude.messages.stream(model="remote/second/starter", max_tokens=12, messages=HI, extra_body=greedy,
                                stop_sequences=[word]) as stream:
        final = stream.get_final_message()
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", word)
    # a remote that only says finish_reason "stop" (as OpenAI does) cannot tell a stop string from its own end
    unknown = claude.messages.create(model="remote/plain/fake-model", max_tokens=12, messages=HI, stop_sequences=["t9"])
    assert (unknown.stop_reason, unknown.stop_sequence) == ("end_turn", None)
