"""Chat templates from model files render under budgets that stop them before they allocate.

The hostile templates are written into copies of the real SmolLM2 GGUF and read back through model
inspection, the path a downloaded model takes; the real SmolLM2 template must render exactly as the
plain Jinja sandbox renders it.
"""

from __future__ import annotations

import threading
import time
import tracemalloc

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from fireside.engine.errors import ContextOverflow, TemplateError
from fireside.engine.models.inspection import inspect_file
from fireside.engine.prompts import templates
from fireside.engine.prompts.templates import ChatTemplate
from tests.helpers.models import with_chat_template

HI = [{"role": "user", "content": "hi"}]
BOMBS = {
    "repeat 10**8": "{{ 'A' * 10**8 }}",
    "repeat 10**9": "{{ 'A' * 10**9 }}",
    "list repeat": "{{ ['A'] * 10**9 }}",
    "doubling by ~": "{% set ns = namespace(x='A') %}{% for i in range(60) %}{% set ns.x = ns.x ~ ns.x %}"
                     "{% endfor %}{{ ns.x }}",
    "doubling by +": "{% set ns = namespace(x='A') %}{% for i in range(60) %}{% set ns.x = ns.x + ns.x %}"
                     "{% endfor %}{{ ns.x }}",
    "center": "{{ 'A'|center(10**9) }}",
    "ljust": "{{ 'A'.ljust(10**9) }}",
    "indent": "{{ ('x\n' * 1000)|indent(10**7) }}",
    "format filter": "{{ '%1000000000d'|format(1) }}",
    "percent": "{{ '%1000000000d' % 1 }}",
    "str.format": "{{ '{:>1000000000}'.format(1) }}",
    "replace": "{{ ('A' * 1000).replace('A', 'A' * 100000) }}",
    "join": "{{ ','.join(['A' * 1000000] * 100) }}",
    "sum of lists": "{{ ([[1] * 100000] * 1000)|sum(start=[]) }}",
    "power": "{{ 2 ** 1000000000 }}",
    "squaring": "{% set ns = namespace(x=3) %}{% for i in range(64) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "output": "{% for i in range(100000) %}{{ 'A' * 1000 }}{% endfor %}",
    "nested loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "precision": "{{ '%.1000000000d' % 1 }}",
    "format precision": "{{ '{:.1000000000f}'.format(1.5) }}",
    "star width": "{{ '%*d' % (1000000000, 1) }}",
    "nested format width": "{{ '{:{}}'.format(1, 1000000000) }}",
    "batch fill": "{{ [1]|batch(10**9, 'x')|list }}",
    "slice": "{{ [1]|slice(10**9)|list }}",
    "tojson indent": "{{ messages|tojson(indent=10**8) }}",
}


def _from_gguf(tmp_path, smollm2_path, source: str) -> ChatTemplate:
    info = inspect_file(with_chat_template(smollm2_path, tmp_path / "bomb.gguf", source))
    return ChatTemplate(info.chat_template, info.bos_token, info.eos_token)


@pytest.mark.parametrize("source", ["{{ 'A' * 10**8 }}", "{{ 'A' * 10**9 }}"], ids=["10**8", "10**9"])
def test_template_bombs_from_a_model_file_are_refused_fast_and_small(tmp_path, smollm2_path, source):
    template = _from_gguf(tmp_path, smollm2_path, source)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(TemplateError, match="budget"):
            template.render(HI)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 2.0
    assert peak < 20 * 2**20, f"the render allocated {peak / 2**20:.0f} MiB before being refused"


@pytest.mark.parametrize("source", BOMBS.values(), ids=BOMBS.keys())
def test_every_growing_operation_is_sized_before_it_runs(source):
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(TemplateError, match="budget") as refused:
            ChatTemplate(source).render(HI)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 8.0
    assert peak < 64 * 2**20, f"{refused.value}: {peak / 2**20:.0f} MiB allocated first"


def test_numbers_in_format_strings_that_are_not_widths_are_no_reason_to_refuse():
    out = ChatTemplate("{{ 'Knowledge cutoff: 2024-12-01, id 1000000000: %s' % 'x' }}"
                       "{{ ' and {} in 1000000000'.format('y') }}").render(HI)
    assert out == "Knowledge cutoff: 2024-12-01, id 1000000000: x and y in 1000000000"


def test_lipsum_is_not_offered():
    with pytest.raises(TemplateError, match="lipsum"):
        ChatTemplate("{{ lipsum(10**6) }}").render(HI)


CONVERSATIONS = [
    HI,
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"},
     {"role": "assistant", "content": "4"}, {"role": "user", "content": "and 3+3?"}],
    [{"role": "user", "content": "x" * 100_000}],
]


@pytest.mark.parametrize("messages", CONVERSATIONS, ids=["one", "turns", "long"])
def test_the_real_smollm2_template_renders_as_the_plain_sandbox_renders_it(smollm2_path, messages):
    info = inspect_file(smollm2_path)
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                          extensions=["jinja2.ext.loopcontrols"])
    expected = plain.from_string(info.chat_template).render(messages=messages, add_generation_prompt=True,
                                                            bos_token=info.bos_token, eos_token=info.eos_token)
    rendered = ChatTemplate(info.chat_template, info.bos_token, info.eos_token).render(messages)
    assert rendered == expected


def test_a_prompt_near_the_output_budget_still_renders():
    big = "y" * (4 * 2**20)
    assert big in ChatTemplate(None).render([{"role": "user", "content": big}])


def test_splitting_a_long_conversation_into_segments_is_linear():
    # 100,000 messages took 9 s in the server process when each cut copied the rest of the prompt
    n, nonce = 100_000, "0123456789abcdef"
    contents = {f"FiresideContent{nonce}N{i}X": "a" for i in range(n)}
    prompt = "".join(f"<|im_start|>user\n{key}<|im_end|>\n" for key in contents)
    started = time.perf_counter()
    segments = templates._split(prompt, nonce, contents)
    assert time.perf_counter() - started < 5.0
    assert len(segments) == 2 * n + 1 and segments[1] == ("a", False)


def test_a_conversation_longer_than_any_context_is_a_context_overflow():
    with pytest.raises(ContextOverflow):
        ChatTemplate(None).render([{"role": "user", "content": "a"}] * (templates.MAX_MESSAGES + 1))
    with pytest.raises(ContextOverflow):  # rendered past the prompt budget by the conversation itself
        ChatTemplate(None).render([{"role": "user", "content": "a" * 3_000_000}] * 3)


def test_a_huge_template_source_is_refused_before_it_compiles():
    started = time.perf_counter()
    with pytest.raises(TemplateError, match="character limit"):
        ChatTemplate("{{a}}" * 1_000_000)
    assert time.perf_counter() - started < 1.0


class _HeldWorker:
    """A template worker whose hostile jobs run until the test lets them end (with a budget error)."""

    gate = threading.Event()

    def __init__(self):
        self.sources: list[str] = []

    def ask(self, job, timeout):
        if job["source"] == "hostile":
            _HeldWorker.gate.wait(30)
            return {"error": "the template went over its time budget", "kind": "budget"}
        return {"result": "rendered"}

    def close(self):
        pass


def test_one_hostile_template_cannot_take_every_worker(monkeypatch):
    """Four chats at once with a model whose template runs to its budget held all four template workers,
    and a chat with any other model waited for one (a 503 after 22 s). One template's jobs now hold at
    most three workers, and once one has failed, one at a time on a demoted worker. The pool's policy,
    with workers whose jobs end when the test says (the real workers' budgets: the tests above)."""
    from fireside.engine.prompts import renderer

    demoted: list[object] = []
    monkeypatch.setattr(renderer, "_Worker", _HeldWorker)
    monkeypatch.setattr(renderer, "_demote", demoted.append)
    pool = renderer._Pool()
    _HeldWorker.gate.clear()
    hostile = [threading.Thread(target=pool.ask, args=({"source": "hostile"},)) for _ in range(4)]
    for t in hostile:
        t.start()
    deadline = time.monotonic() + 10
    while pool._busy["hostile"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    assert pool._busy["hostile"] == 3  # the fourth waits for a lane
    assert pool.ask({"source": "plain"}) == {"result": "rendered"}  # while three hostile jobs still run
    _HeldWorker.gate.set()
    for t in hostile:
        t.join(10)
    assert "hostile" in pool._slow and len(demoted) >= 1  # the fourth ran after the first failures
    _HeldWorker.gate.clear()
    again = [threading.Thread(target=pool.ask, args=({"source": "hostile"},)) for _ in range(3)]
    for t in again:
        t.start()
    time.sleep(0.3)
    assert pool._busy["hostile"] == 1  # once it has failed: one at a time
    assert pool.ask({"source": "plain"}) == {"result": "rendered"}
    _HeldWorker.gate.set()
    for t in again:
        t.join(10)
    assert pool._busy["hostile"] == 0 and len(demoted) >= 4
