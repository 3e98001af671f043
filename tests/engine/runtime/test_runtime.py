"""The runtime on the real SmolLM2-135M-Instruct: streaming, sampling controls, cancel, constrained
output, tools, prefix reuse, hostile templates and runner crashes."""

from __future__ import annotations

import json
import os
import signal
import threading

import pytest

from fireside.engine.errors import ContextOverflow, RunnerCrashed, TemplateError
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

pytestmark = pytest.mark.model


def ask(text: str, **sampling) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], sampling=Sampling(**sampling))


def collect(chunks):
    chunks = list(chunks)
    text = "".join(c.text for c in chunks if c.kind == "text")
    return text, chunks[-1], chunks


def test_reply_streams_in_pieces_and_reports_usage(runtime):
    text, done, chunks = collect(runtime.chat("starter", ask("Name three colours.", max_tokens=24, seed=1)))
    assert len([c for c in chunks if c.kind == "text"]) > 3
    assert text.strip()
    assert done.kind == "done" and done.finish_reason in ("stop", "length")
    u = done.usage
    assert u.prompt_tokens > 10 and 0 < u.completion_tokens <= 24
    assert u.ttft_s > 0 and u.decode_tokens_per_s > 0  # speed itself is bench/runtime.py's business


def test_max_tokens_ends_the_reply_with_length(runtime):
    _, done, _ = collect(runtime.chat("starter", ask("Write a long story about a dragon.", max_tokens=7, seed=3)))
    assert (done.finish_reason, done.usage.completion_tokens) == ("length", 7)


def test_same_seed_same_text_and_another_seed_differs(runtime):
    req = dict(max_tokens=20, temperature=1.0, seed=42)
    a, _, _ = collect(runtime.chat("starter", ask("Tell me a fun fact.", **req)))
    b, _, _ = collect(runtime.chat("starter", ask("Tell me a fun fact.", **req)))
    c, _, _ = collect(runtime.chat("starter", ask("Tell me a fun fact.", **{**req, "seed": 7})))
    assert a == b
    assert a != c


def test_stop_strings_end_the_reply_and_never_show(runtime):
    prompt = "Count from 1 to 20, one number per line."
    base, _, _ = collect(runtime.chat("starter", ask(prompt, max_tokens=40, temperature=0)))
    assert "\n" in base.strip()
    text, done, _ = collect(runtime.chat("starter", ask(prompt, max_tokens=40, temperature=0, stop=["\n"])))
    assert done.finish_reason == "stop"
    assert text and "\n" not in text
    # a stop string that spans several tokens is held back until it is decided
    text, done, _ = collect(runtime.chat("starter", ask(prompt, max_tokens=40, temperature=0, stop=["3\n4"])))
    assert "3\n4" not in text
    assert done.finish_reason == "stop" or done.usage.completion_tokens == 40


def test_cancel_mid_stream_stops_within_a_token_and_the_next_request_works(runtime):
    cancel = threading.Event()
    pieces = 0
    chunks = []
    for chunk in runtime.chat("starter", ask("Write a long essay about the sea.", max_tokens=400, seed=1), cancel=cancel):
        chunks.append(chunk)
        if chunk.kind == "text":
            pieces += 1
            if pieces == 5:
                cancel.set()
    done = chunks[-1]
    assert done.finish_reason == "cancelled"
    assert done.usage.completion_tokens <= 8  # stopped within a token or two of the request
    _, again, _ = collect(runtime.chat("starter", ask("Hi!", max_tokens=5)))
    assert again.finish_reason in ("stop", "length")


def test_json_schema_reply_parses_and_validates(runtime):
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
              "required": ["city", "population"], "additionalProperties": False}
    req = ask("Give the capital of France and its population as JSON.", max_tokens=80, seed=5)
    req.json_schema = schema
    text, done, _ = collect(runtime.chat("starter", req))
    data = json.loads(text)
    assert set(data) == {"city", "population"}
    assert isinstance(data["city"], str) and isinstance(data["population"], int)


def test_forced_tool_call_comes_back_structured(runtime):
    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    req = ask("What is the weather in Paris?", max_tokens=60, seed=2)
    req.tools, req.tool_choice = [weather], "required"
    _, done, chunks = collect(runtime.chat("starter", req))
    calls = [c for c in chunks if c.kind == "tool_calls"]
    assert len(calls) == 1 and done.finish_reason == "tool_calls"
    call = calls[0].tool_calls[0]
    assert call.name == "get_weather"
    assert isinstance(json.loads(call.arguments)["city"], str)
    assert not [c for c in chunks if c.kind == "text"]


def test_turn_n_reuses_the_evaluated_prefix(runtime):
    messages = [{"role": "user", "content": "Hello, who are you?"}]
    evaluated = []
    for turn in range(3):
        req = ChatRequest(messages=list(messages), sampling=Sampling(max_tokens=12, seed=turn))
        text, done, _ = collect(runtime.chat("starter", req))
        evaluated.append((done.usage.prompt_tokens, done.usage.cached_tokens))
        messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Tell me more, part {turn}."}]
    for (prev_prompt, _), (prompt, cached) in zip(evaluated, evaluated[1:]):
        assert cached >= prev_prompt - 1  # the earlier turns are not read again
        assert prompt - cached < prompt / 2


def test_prompt_longer_than_the_context_is_reported(runtime):
    with pytest.raises(ContextOverflow, match="context holds 2,048"):
        list(runtime.chat("starter", ask("word " * 3000, max_tokens=5)))


PAYLOADS = [
    "{{ cycler.__init__.__globals__.os.popen('touch MARKER').read() }}",
    "{{ lipsum.__globals__['os'].system('touch MARKER') }}",
    "{% for c in ''.__class__.__mro__[1].__subclasses__() %}{% if c.__name__ == 'Popen' %}"
    "{{ c(['touch', 'MARKER']) }}{% endif %}{% endfor %}",
    "{{ self.__init__.__globals__.__builtins__.open('MARKER', 'w').write('pwned') }}",
    "{{ namespace.__init__.__globals__.__builtins__.__import__('os').system('touch MARKER') }}",
]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_hostile_chat_template_runs_nothing_and_says_so(tmp_path, smollm2_path, payload):
    from tests.helpers.models import with_chat_template

    marker = tmp_path / "pwned"
    hostile = with_chat_template(smollm2_path, tmp_path / "hostile.gguf", payload.replace("MARKER", str(marker)))
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")}), resolver=lambda _: hostile, idle_ttl_s=0)
    try:
        with pytest.raises(TemplateError, match="chat template"):
            list(rt.chat("hostile", ask("hi", max_tokens=3)))
    finally:
        rt.close()
    assert not marker.exists()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_runner_killed_mid_generation_is_a_clear_error_and_the_next_request_succeeds(runtime, sig):
    pid = runtime.loaded()[0].pid
    stream = runtime.chat("starter", ask("Write a long essay about mountains.", max_tokens=300, seed=1))
    with pytest.raises(RunnerCrashed, match=f"killed by {sig.name}"):
        for n, _chunk in enumerate(stream):
            if n == 3:
                os.kill(pid, sig)
    text, done, _ = collect(runtime.chat("starter", ask("Say hello.", max_tokens=8)))
    assert done.finish_reason in ("stop", "length") and text
    assert runtime.loaded()[0].pid != pid


def _huge_bytes(pid: int) -> int:
    """The runner's anonymous memory in transparent huge pages."""
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith("AnonHugePages:"))


def test_a_cpu_load_reads_its_weights_into_huge_pages_and_replies_as_a_mapped_load_does(runtime, tmp_path):
    """On Linux with transparent huge pages a CPU-only load reads the weights into memory in huge pages
    (planner.huge_pages): they are llama.cpp's own buffer, not the mapped file, and the runner holds them in
    huge pages; a load told not to (--no-huge-pages) maps the file, and both give the same greedy reply."""
    from fireside.engine.models.fitplan import LoadOptions
    from fireside.engine.models.hardware import detect

    hw = detect()
    if not hw.huge_page_weights:
        pytest.skip("no transparent huge pages for glibc's malloc here, or a device besides the CPU: every load maps its file")
    held = runtime.loaded()[0]
    assert any("huge pages" in n for n in held.notes), held.notes
    weights = held.reported_buffers.get("CPU model", 0) * 2**20
    assert weights > 50 * 2**20 and "CPU_Mapped model" not in held.reported_buffers, held.reported_buffers
    other = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}), idle_ttl_s=0)
    try:
        mapped = other.load("starter", LoadOptions(context=2048, huge_pages=False))
        assert mapped.reported_buffers.get("CPU_Mapped model", 0) * 2**20 > 50 * 2**20, mapped.reported_buffers
        assert _huge_bytes(held.pid) - _huge_bytes(mapped.pid) >= weights / 2  # "always" puts the KV cache in them too
        request = ask("Name three rivers and one fact about each.", max_tokens=40, temperature=0)
        assert collect(runtime.chat("starter", request))[0] == collect(other.chat("starter", request))[0]
    finally:
        other.close()
