"""The translation tables on their own: engine errors to statuses, Ollama's keep_alive, sampling checks."""

from __future__ import annotations

import pytest

from fireside.engine.errors import (
    ContextOverflow,
    FiresideError,
    GrammarDeadEnd,
    ModelNotFound,
    QueueFull,
    RunnerCrashed,
    UnsafePath,
)
from fireside.engine.server.errors import ApiError, describe, dialect_of, error_body
from fireside.engine.server.inbound import check_tool_choice, sampling, text_of
from fireside.engine.server.ollama import keep_alive_s, runtime_ttl


@pytest.mark.parametrize("exc, status, code", [
    (ModelNotFound("x"), 404, "model_not_found"), (UnsafePath("x"), 404, "model_not_found"),
    (ContextOverflow("x"), 400, "context_length_exceeded"), (QueueFull("x"), 503, "queue_full"),
    (RunnerCrashed("the runner was killed by SIGKILL"), 500, "runner_crashed"),
    (FiresideError("x"), 500, "runtime_error"), (ApiError("bad", 400, param="p"), 400, None),
    (GrammarDeadEnd("grammar_dead_end: ... at position 3", 3), 400, "grammar_dead_end"),  # not retried as a 5xx
])
def test_engine_errors_map_to_statuses(exc, status, code):
    problem = describe(exc)
    assert (problem.status, problem.code) == (status, code)
    assert problem.message == str(exc)


def test_each_dialect_gets_its_own_error_shape():
    problem = describe(ModelNotFound("no model named 'x'"))
    assert error_body(dialect_of("/v1/chat/completions"), problem)["error"]["code"] == "model_not_found"
    assert error_body(dialect_of("/api/chat"), problem) == {"error": "no model named 'x'"}
    body = error_body(dialect_of("/v1/messages"), problem)
    assert body["type"] == "error" and body["error"]["type"] == "not_found_error"


@pytest.mark.parametrize("given, seconds, ttl", [
    (None, None, 600.0), ("5m", 300.0, 300.0), ("30s", 30.0, 30.0), (-1, -1.0, 0.0), ("-1", -1.0, 0.0),
    (0, 0.0, 600.0), ("1h", 3600.0, 3600.0), ("250ms", 0.25, 0.25), (1e300, -1.0, 0.0),
])
def test_keep_alive(given, seconds, ttl):
    assert keep_alive_s(given) == seconds
    assert runtime_ttl(keep_alive_s(given), 600.0) == ttl  # runtime ttl 0 means "never unload"


def test_bad_keep_alive_and_sampling_are_400():
    with pytest.raises(ApiError):
        keep_alive_s("soon")
    with pytest.raises(ApiError):
        sampling(max_tokens=0)
    with pytest.raises(ApiError):
        sampling(stop=["x"] * 17)
    assert sampling(stop="END", seed=3).stop == ["END"]


def test_tool_choice_and_content_checks():
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert check_tool_choice(tools, {"type": "function", "function": {"name": "f"}}) == {"name": "f"}
    with pytest.raises(ApiError):
        check_tool_choice(tools, {"type": "function", "function": {"name": "g"}})
    with pytest.raises(ApiError):
        check_tool_choice(None, "required")
    assert text_of([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "ab"
    with pytest.raises(ApiError):
        text_of([{"type": "image_url", "image_url": {"url": "data:"}}])
