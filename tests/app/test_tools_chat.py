"""Tools in the chat window, end to end: the real SmolLM2 with a grammar-forced call to the real test MCP
server (stdio). The approval card shows the server, tool and full arguments; Run runs the call and its
result is in the prompt of the next generation; Deny does not run it and the model is told; Stop while a
card waits ends the reply; the folded blocks are saved, survive an app restart, and are exported."""

from __future__ import annotations

import json

import pytest

from fireside.app.chat.request import request_messages
from fireside.app.chat.toolcard import ToolCallView
from fireside.engine.mcp import McpConfig
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest
from tests.helpers.mcp_fixtures import stdio_server
from tests.helpers.mcp_server import MARKER

pytestmark = pytest.mark.model
FORCE_WEATHER = {"type": "function", "function": {"name": "weather"}}
QUESTION = "What is the weather in Paris today?"


@pytest.fixture
def tools_app(make_app, loaded_runtime):
    McpConfig(Settings.from_env()).add(stdio_server("tests"))
    return make_app(loaded_runtime)


def start_tool_chat(qtbot, app, steps: int = 1):
    """A new chat with the test server's tools on and a forced first call; returns the page and the
    card of the call once it waits for approval."""
    page = app.window.chat
    qtbot.waitUntil(lambda: "tests" in page.settings_panel.server_boxes, timeout=10_000)
    page.settings_panel.server_boxes["tests"].setChecked(True)
    page.settings_panel.max_steps.setValue(steps)
    page.settings_panel.max_tokens.setValue(24)
    page.settings_panel.fixed_seed.setChecked(True)
    page.settings_panel.temperature.setValue(0)
    page.session.tool_turn.tool_choice = FORCE_WEATHER
    page.composer.setPlainText(QUESTION)
    page.send_button.click()
    qtbot.waitUntil(lambda: (card := pending_card(page)) is not None and card.isVisible(), timeout=120_000)
    return page, pending_card(page)


def pending_card(page) -> ToolCallView | None:
    cards = [v for v in page.transcript.views.values() if isinstance(v, ToolCallView)]
    return next((c for c in cards if c.message.state == "pending"), None)


def decide(qtbot, page, card, decision: str):
    with qtbot.waitSignal(page.reply_ended, timeout=120_000) as ended:
        card.decision_buttons[decision].click()
    return ended.args


def weather_calls(app) -> int:
    return int(app.ctx.tools.hub().call("tests", "weather_calls").text)


def test_the_card_shows_the_call_and_run_feeds_the_result_back(qtbot, tools_app, loaded_runtime):
    page, card = start_tool_chat(qtbot, tools_app)
    assert card.isVisible() and card.details.isVisible() and card.buttons.isVisible()
    assert "tests › weather wants to run" in card.title.text()
    args = json.loads(card.arguments.toPlainText())
    assert isinstance(args.get("city"), str), "the full arguments are shown as JSON"
    assert card.arguments.toPlainText().startswith("{\n"), "pretty-printed"
    assert page.stop_button.isVisible(), "a reply waiting for approval is still a reply under way"
    before = weather_calls(tools_app)
    reply_id, state = decide(qtbot, page, card, "run")
    assert state == "complete" and weather_calls(tools_app) == before + 1
    store = tools_app.ctx.store
    thread = store.thread(page.conv_id)
    assert [m.role for m in thread] == ["user", "assistant", "tool", "assistant"]
    assert thread[-1].id == reply_id and thread[1].tool["calls"][0]["function"]["name"] == "weather"
    tool = thread[2]
    assert tool.state == "complete" and tool.tool["outcome"] == "run" and MARKER in tool.content
    assert tool.tool["call_id"] == thread[1].tool["calls"][0]["id"]
    done = page.transcript.view(tool.id)
    qtbot.waitUntil(done.isVisible)  # the cards of a redrawn thread are shown on the next tick
    assert not done.buttons.isVisible() and not done.details.isVisible(), "a finished call is folded"
    assert "ran" in done.toggle.text()
    done.toggle.click()
    assert done.result.isVisible() and MARKER in done.result.toPlainText()
    assert isinstance(done.result, type(done.arguments)) and done.result.isReadOnly()
    # What the model read for its answer: the question, its call, and the tool's result.
    messages = request_messages(page.store, page.conv_id)[:-1]
    prompt = loaded_runtime.render_prompt("starter", ChatRequest(messages=messages))
    assert MARKER in prompt and QUESTION in prompt


def test_deny_does_not_run_the_call_and_tells_the_model(qtbot, tools_app, loaded_runtime):
    page, card = start_tool_chat(qtbot, tools_app)
    before = weather_calls(tools_app)
    _reply_id, state = decide(qtbot, page, card, "deny")
    assert state == "complete" and weather_calls(tools_app) == before
    tool = tools_app.ctx.store.thread(page.conv_id)[2]
    assert tool.tool["outcome"] == "denied" and "denied" in page.transcript.view(tool.id).toggle.text()
    messages = request_messages(page.store, page.conv_id)[:-1]
    prompt = loaded_runtime.render_prompt("starter", ChatRequest(messages=messages))
    assert "The user denied this call to weather; it was not run." in prompt and MARKER not in prompt


def test_stop_while_a_card_waits_ends_the_reply_without_running_it(qtbot, tools_app):
    page, card = start_tool_chat(qtbot, tools_app)
    before = weather_calls(tools_app)
    with qtbot.waitSignal(page.reply_ended, timeout=60_000) as ended:
        page.stop_button.click()
    assert ended.args[1] == "stopped" and weather_calls(tools_app) == before
    tool = tools_app.ctx.store.thread(page.conv_id)[-1]
    assert tool.role == "tool" and tool.tool["outcome"] == "cancelled" and tool.state == "stopped"
    assert page.send_button.isVisible() and not page.stop_button.isVisible()


def test_calls_are_saved_survive_a_restart_and_are_exported(qtbot, make_app, tools_app, loaded_runtime, tmp_path):
    page, card = start_tool_chat(qtbot, tools_app)
    reply_id, _ = decide(qtbot, page, card, "always")
    conv_id = page.conv_id
    tool_id = tools_app.ctx.store.thread(conv_id)[2].id
    tools_app.stop()
    again = make_app(loaded_runtime)
    page = again.window.chat
    assert page.conv_id == conv_id
    card = page.transcript.view(tool_id)
    qtbot.waitUntil(card.isVisible)
    assert isinstance(card, ToolCallView) and "ran" in card.toggle.text() and not card.details.isVisible()
    assert MARKER in card.result.toPlainText() and page.transcript.view(reply_id) is not None
    assert page.settings_panel.tools()["servers"] == ["tests"], "the chat keeps its tools on"
    assert again.ctx.prefs.get("tools_always_allowed") == [["tests", "weather"]], "'Always allow this tool' is kept"
    assert ("tests", "weather") in page.session.tool_turn.allowed(conv_id + 1), "for every chat"
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    page.export(conv_id, "markdown", md)
    page.export(conv_id, "json", js)
    qtbot.waitUntil(lambda: md.exists() and js.exists())
    text = md.read_text()
    assert "**Tool call: tests › weather** (run)" in text and MARKER in text and '"city"' in text
    data = json.loads(js.read_text())
    tools = [m for m in data["messages"] if m["role"] == "tool"]
    assert tools and tools[0]["tool"]["server"] == "tests" and MARKER in tools[0]["content"]


def test_a_remote_model_calls_a_tool_through_the_same_card(qtbot, make_app, loaded_runtime, remote_server):
    """The remote engine (a second Fireside server on loopback) returns the call structured; the card,
    the approval and the result fed back are the same as for a local model."""
    from fireside.engine.remote import RemoteRegistry
    from fireside.engine.runtime.runtime import Runtime

    settings = Settings.from_env()
    settings.ensure_dirs()
    RemoteRegistry(settings).add("lab", f"{remote_server.url}/v1")
    McpConfig(settings).add(stdio_server("tests"))
    runtime = Runtime(settings, idle_ttl_s=0)  # nothing local: the model runs on the remote server
    try:
        app = make_app(runtime, settings)
        page = app.window.chat
        qtbot.waitUntil(lambda: page.model_bar.combo.findText("remote/lab/starter") >= 0, timeout=20_000)
        page.model_bar.set_model("remote/lab/starter")
        page, card = start_tool_chat(qtbot, app)
        assert "tests › weather wants to run" in card.title.text() and '"city"' in card.arguments.toPlainText()
        _reply_id, state = decide(qtbot, page, card, "run")
        assert state == "complete" and runtime.loaded() == []
        tool = app.ctx.store.thread(page.conv_id)[2]
        assert tool.tool["outcome"] == "run" and MARKER in tool.content
    finally:
        runtime.close()
