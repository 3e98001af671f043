"""A grammar that allows no next token ends its own request with ``grammar_dead_end``, never the runner.

The grammar here passes every check before the runner (it compiles, every rule can complete): it
forces ``Hello`` and then a NUL character, which no token of SmolLM2 can produce (llama.cpp masks every
token whose text starts with a NUL byte). So the row after ``Hello`` is masked completely; llama.cpp
would sample a masked token anyway and abort the runner in ``llama_grammar_accept_impl``.
"""

from __future__ import annotations

import threading

import pytest

from fireside.engine.errors import GrammarDeadEnd
from fireside.engine.structured.grammar import checked
from fireside.engine.types import ChatRequest, CompletionRequest, Sampling

pytestmark = pytest.mark.model

DEAD_AFTER_HELLO = 'root ::= "Hello" [\\x00] "!"'


def test_the_grammar_passes_the_checks_before_the_runner():
    assert checked(DEAD_AFTER_HELLO) == DEAD_AFTER_HELLO


def _complete(runtime, grammar, temperature, max_tokens=20):
    request = CompletionRequest("Say hello.", Sampling(max_tokens=max_tokens, temperature=temperature, seed=1),
                                grammar=grammar)
    return list(runtime.complete("starter", request))


@pytest.mark.parametrize("temperature", [0.0, 0.8], ids=["greedy", "sampled"])
def test_a_dead_end_mid_reply_ends_that_request_and_the_runner_lives(runtime, temperature):
    pid = runtime.loaded()[0].pid
    with pytest.raises(GrammarDeadEnd, match="grammar_dead_end") as ended:
        _complete(runtime, DEAD_AFTER_HELLO, temperature)
    assert "after 5 characters" in str(ended.value), str(ended.value)  # "Hello", then nothing could follow
    assert ended.value.position >= 1
    assert runtime.loaded()[0].pid == pid
    chunks = _complete(runtime, None, 0.0, max_tokens=4)  # the same runner answers the next request
    assert chunks[-1].kind == "done" and "".join(c.text for c in chunks if c.kind == "text")


def test_another_stream_on_the_runner_runs_to_its_end(runtime):
    pid = runtime.loaded()[0].pid
    request = ChatRequest([{"role": "user", "content": "Count from one to twenty."}],
                          Sampling(max_tokens=16, temperature=0.0))
    other: dict = {"text": "", "chunks": 0}
    started = threading.Event()

    def stream():
        try:
            for chunk in runtime.chat("starter", request):
                other["text"] += chunk.text if chunk.kind == "text" else ""
                other["chunks"] += 1
                other["finish"] = chunk.finish_reason
                started.set()
        except Exception as exc:  # reported below
            other["error"] = exc
        finally:
            started.set()

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    assert started.wait(60)
    with pytest.raises(GrammarDeadEnd):
        _complete(runtime, DEAD_AFTER_HELLO, 0.0)
    thread.join(120)
    assert "error" not in other, other.get("error")
    assert other["finish"] in ("length", "stop") and other["text"]
    assert runtime.loaded()[0].pid == pid
