"""The chat tool loop on the real SmolLM2 model and the real test MCP server: a grammar-forced call,
approved, denied or stopped, and the tool's answer in the prompt of the next generation."""

from __future__ import annotations

import threading

import pytest

from fireside.engine.mcp import McpConfig, McpHub, Timeouts
from fireside.engine.mcp.loop import PendingCall, ToolLoop
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.mcp_fixtures import stdio_server
from tests.helpers.mcp_server import MARKER

pytestmark = pytest.mark.model
FORCE_WEATHER = {"type": "function", "function": {"name": "weather"}}
QUESTION = [{"role": "user", "content": "What is the weather in Paris today?"}]


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("loop"))})


@pytest.fixture(scope="module")
def runtime(settings):
    rt = Runtime(settings, idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=2048))
    yield rt
    rt.close()


@pytest.fixture(scope="module")
def hub(settings):
    config = McpConfig(settings)
    config.add(stdio_server("tests"))
    with McpHub(settings, config, timeouts=Timeouts(start_s=60, call_s=20)) as hub:
        yield hub


def weather_calls(hub) -> int:
    return int(hub.call("tests", "weather_calls").text)


def loop_with(runtime, hub, decide) -> tuple[ToolLoop, list[PendingCall]]:
    asked: list[PendingCall] = []

    def approve(call: PendingCall) -> str:
        asked.append(call)
        return decide(call)

    tools = [t for t in hub.tools("tests") if t.name == "weather"]
    return ToolLoop(runtime, hub, tools, approve, max_steps=1), asked


def run(loop: ToolLoop, cancel: threading.Event | None = None):
    return loop.run("starter", QUESTION, Sampling(max_tokens=40, seed=1, temperature=0), cancel=cancel,
                    tool_choice=FORCE_WEATHER)


def next_prompt(runtime, loop: ToolLoop, result) -> str:
    """The prompt of the generation that followed the call: the question, the call, its result."""
    request = ChatRequest(messages=QUESTION + result.messages[:-1], tools=loop.specs, tool_choice="none")
    return runtime.render_prompt("starter", request)


def test_an_approved_call_runs_and_its_result_is_in_the_next_prompt(runtime, hub):
    before = weather_calls(hub)
    loop, asked = loop_with(runtime, hub, lambda call: "run")
    result = run(loop)
    assert len(asked) == 1
    call = asked[0]
    assert (call.server, call.tool) == ("tests", "weather")
    assert isinstance(call.arguments.get("city"), str) and call.pretty_arguments().startswith("{\n")
    assert [s.outcome for s in result.steps] == ["run"] and MARKER in result.steps[0].content
    assert weather_calls(hub) == before + 1
    roles = [m["role"] for m in result.messages]
    assert roles == ["assistant", "tool", "assistant"]
    assert result.messages[0]["tool_calls"][0]["function"]["name"] == "weather"
    assert result.messages[1]["tool_call_id"] == result.messages[0]["tool_calls"][0]["id"]
    assert MARKER in next_prompt(runtime, loop, result)
    assert result.finish_reason in ("stop", "length") and result.hit_step_limit


def test_a_denied_call_does_not_run_and_the_model_is_told(runtime, hub):
    before = weather_calls(hub)
    loop, asked = loop_with(runtime, hub, lambda call: "deny")
    result = run(loop)
    assert len(asked) == 1 and [s.outcome for s in result.steps] == ["denied"]
    assert weather_calls(hub) == before
    prompt = next_prompt(runtime, loop, result)
    assert "The user denied this call to weather; it was not run." in prompt and MARKER not in prompt


def test_stop_during_approval_ends_the_loop_without_running_the_call(runtime, hub):
    before = weather_calls(hub)
    cancel = threading.Event()

    def stop_then_run(call: PendingCall) -> str:
        cancel.set()  # the user pressed Stop while the approval card was showing
        return "run"

    loop, _ = loop_with(runtime, hub, stop_then_run)
    result = run(loop, cancel)
    assert result.finish_reason == "cancelled" and [s.outcome for s in result.steps] == ["cancelled"]
    assert weather_calls(hub) == before
    assert [m["role"] for m in result.messages] == ["assistant", "tool"]  # no answer generated after Stop
