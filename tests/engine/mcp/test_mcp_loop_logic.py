"""The tool loop's bookkeeping with a scripted model and the real test MCP server: "always allow",
the step limit, calls that cannot run, and a server that crashes inside the loop."""

from __future__ import annotations

import pytest

from fireside.engine.mcp import McpConfig, McpHub, Timeouts
from fireside.engine.mcp.loop import ToolLoop
from fireside.engine.settings import Settings
from tests.helpers.mcp_fixtures import stdio_server
from tests.helpers.mcp_scripted import ScriptedRuntime

ASK = [{"role": "user", "content": "hi"}]
PARIS = ("weather", '{"city": "Paris"}')


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("logic"))})
    config = McpConfig(settings)
    config.add(stdio_server("tests"))
    with McpHub(settings, config, timeouts=Timeouts(start_s=60, call_s=10)) as hub:
        yield hub


def make(hub, script, decide=lambda call: "run", names=("weather", "crash"), max_steps=4):
    asked = []
    runtime = ScriptedRuntime(script)
    tools = [t for t in hub.tools("tests") if t.name in names]
    loop = ToolLoop(runtime, hub, tools, lambda call: asked.append(call) or decide(call), max_steps=max_steps)
    return loop, runtime, asked


def test_always_asks_once_per_tool_and_runs_every_call(hub):
    before = int(hub.call("tests", "weather_calls").text)
    loop, runtime, asked = make(hub, [[PARIS], [PARIS, ("weather", '{"city": "Oslo"}')], "It is sunny."],
                                decide=lambda call: "always")
    result = loop.run("m", ASK)
    assert len(asked) == 1 and [s.outcome for s in result.steps] == ["run", "run", "run"]
    assert int(hub.call("tests", "weather_calls").text) == before + 3
    assert result.text == "It is sunny." and not result.hit_step_limit
    assert [m["role"] for m in runtime.requests[-1].messages] == ["user", "assistant", "tool", "assistant",
                                                                  "tool", "tool"]


def test_the_step_limit_ends_with_a_round_that_offers_no_tools(hub):
    loop, runtime, _ = make(hub, [[PARIS]] * 10, max_steps=2)
    result = loop.run("m", ASK, tool_choice={"name": "weather"})
    assert [r.tool_choice for r in runtime.requests] == [{"name": "weather"}, "auto", "none"]
    assert result.hit_step_limit and len(result.steps) == 2 and result.text == "no more tools"


def test_unknown_tools_and_bad_arguments_go_back_as_errors_without_asking(hub):
    loop, _, asked = make(hub, [[("rm_rf", "{}"), ("weather", "[1, 2]"), ("weather", "{not json")]])
    result = loop.run("m", ASK)
    assert asked == []
    assert [s.outcome for s in result.steps] == ["error", "error", "error"]
    assert "There is no tool named 'rm_rf'" in result.steps[0].content
    assert "were not a JSON object" in result.steps[1].content
    assert result.text == "done"


def test_a_server_crash_inside_the_loop_becomes_a_tool_error_and_the_chat_goes_on(hub):
    loop, _, _ = make(hub, [[("crash", "{}")], [PARIS], "ok"])
    result = loop.run("m", ASK)
    assert [s.outcome for s in result.steps] == ["error", "run"]
    assert "crashing on purpose" in result.steps[0].content
    assert "MCP-7731" in result.steps[1].content and result.text == "ok"


def test_a_tool_that_only_the_other_server_has_is_named_with_its_server(tmp_path):
    from fireside.engine.mcp.results import McpTool, openai_tools

    specs, by_name = openai_tools([McpTool("a", "search"), McpTool("b.x", "search"), McpTool("a", "fetch")])
    assert [s["function"]["name"] for s in specs] == ["a__search", "b_x__search", "fetch"]
    assert by_name["b_x__search"].server == "b.x"
