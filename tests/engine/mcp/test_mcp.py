"""The MCP hub against a real MCP server written with the SDK (tests/helpers/mcp_server.py): over stdio
and over Streamable HTTP on loopback; tools, calls, and servers that crash, hang, flood or never start."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from fireside.engine.errors import McpServerError, McpTimeout
from fireside.engine.mcp import McpConfig, McpHub, McpServer, Timeouts
from fireside.engine.settings import Settings
from tests.helpers.mcp_fixtures import http_server, stdio_server
from tests.helpers.mcp_server import BIG_CHARS

MALFORMED = Path(__file__).parents[2] / "helpers" / "mcp_malformed.py"

CALL_S = 3.0


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("mcp"))})
    config = McpConfig(settings)
    config.add(stdio_server("a"))
    config.add(stdio_server("b"))
    with McpHub(settings, config, timeouts=Timeouts(start_s=60, list_s=20, call_s=CALL_S)) as hub:
        yield hub


def test_stdio_server_lists_its_tools_and_answers_a_call(hub):
    tools = {t.name: t for t in hub.tools("a")}
    assert {"add", "echo", "crash", "hang", "big"} <= set(tools)
    assert tools["add"].description == "Add two integers."
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert hub.call("a", "add", {"a": 2, "b": 40}).text == "42"
    assert [s.state for s in hub.statuses() if s.server.name == "a"] == ["running"]


def test_a_tool_error_comes_back_as_an_error_result_not_an_exception(hub):
    result = hub.call("a", "add", {"a": "two"})
    assert result.is_error and "validation error" in result.text


def test_a_crash_mid_call_is_a_clear_error_and_nothing_else_breaks(hub):
    hub.call("b", "echo", {"text": "b is up"})
    started = time.monotonic()
    with pytest.raises(McpServerError, match="'a' failed while calling 'crash'.*crashing on purpose"):
        hub.call("a", "crash")
    assert time.monotonic() - started < CALL_S  # the closed pipe is noticed, not waited out
    assert hub.call("b", "echo", {"text": "still here"}).text == "still here"
    assert hub.call("a", "echo", {"text": "restarted"}).text == "restarted"  # a fresh process


def test_a_hung_tool_times_out_within_its_bound_and_the_server_is_restarted(hub):
    started = time.monotonic()
    with pytest.raises(McpTimeout, match=r"'a' did not answer within 3 s while calling 'hang'"):
        hub.call("a", "hang")
    assert time.monotonic() - started < CALL_S + 8  # the bound plus stopping the stuck process
    assert hub.call("a", "echo", {"text": "alive"}).text == "alive"


def test_a_megabyte_result_is_truncated_with_a_note(hub):
    result = hub.call("b", "big")
    assert result.truncated and result.chars == BIG_CHARS
    assert len(result.text) < 60_000
    assert result.text.startswith("0123456789abcdef")
    assert "truncated this tool result: it was 1,048,576 characters" in result.text


def test_streamable_http_server_with_its_token_in_the_keyring(memory_keyring, tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    config = McpConfig(settings)
    with http_server(token="s3cret") as url, McpHub(settings, config, timeouts=Timeouts(start_s=20)) as hub:
        config.add(McpServer(name="web", url=url), token="s3cret")
        config.add(McpServer(name="nokey", url=url))
        assert "s3cret" not in config.path.read_text() and json.loads(config.path.read_text())[
            "mcpServers"]["web"] == {"url": url, "tokenInKeyring": True}
        assert memory_keyring.get_password("Fireside MCP servers", "web") == "s3cret"
        assert "weather" in [t.name for t in hub.tools("web")]
        assert "station MCP-7731" in hub.call("web", "weather", {"city": "Oslo"}).text
        with pytest.raises(McpServerError, match="'nokey' could not start: .*401 Unauthorized"):
            hub.tools("nokey")
        assert hub.call("web", "add", {"a": 1, "b": 2}).text == "3"


def test_a_server_that_exits_at_start_says_why(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    config = McpConfig(settings)
    code = "import sys; sys.stderr.write('no API key configured\\n'); sys.exit(2)"
    config.add(McpServer(name="broken", command=sys.executable, args=["-c", code]))
    config.add(McpServer(name="mute", command=sys.executable, args=["-c", "import time; time.sleep(60)"]))
    config.add(McpServer(name="missing", command="/nonexistent/mcp-server"))
    with McpHub(settings, config, timeouts=Timeouts(start_s=3)) as hub:
        with pytest.raises(McpServerError, match="'broken' could not start.*no API key configured"):
            hub.tools("broken")
        started = time.monotonic()
        with pytest.raises(McpTimeout, match="'mute' did not start within 3 s"):
            hub.tools("mute")
        assert time.monotonic() - started < 3 + 8
        with pytest.raises(McpServerError, match="'missing' could not start"):
            hub.tools("missing")
        states = {s.server.name: s.state for s in hub.statuses()}
        assert states == {"broken": "failed", "mute": "failed", "missing": "failed"}


def test_a_config_pasted_from_claude_desktop_or_jan_is_read_and_kept(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    config = McpConfig(settings)
    config.path.parent.mkdir(parents=True)
    config.path.write_text(json.dumps({"globalShortcut": "x", "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp/my files"],
                  "env": {"DEBUG": "1"}},
        "jan-off": {"command": "uvx", "args": ["mcp-server-fetch"], "active": False},
        "remote": {"url": "https://example.com/mcp", "headers": {"X-Team": "a"}}}}))
    servers = {s.name: s for s in config.list()}
    assert servers["files"].describe() == "DEBUG=1 npx -y @modelcontextprotocol/server-filesystem '/tmp/my files'"
    assert servers["jan-off"].disabled and servers["remote"].transport == "http"
    config.add(stdio_server("mine"))
    kept = json.loads(config.path.read_text())
    assert kept["globalShortcut"] == "x" and set(kept["mcpServers"]) == {"files", "jan-off", "remote", "mine"}
    with pytest.raises(McpServerError, match="needs either a \"command\" or a \"url\""):
        config.add(McpServer(name="neither"))
    with pytest.raises(McpServerError, match="not a usable MCP server name"):
        config.add(McpServer(name="../x", command="true"))


def test_malformed_answers_are_clear_errors_within_the_bound(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    config = McpConfig(settings)
    config.add(McpServer(name="badlist", command=sys.executable, args=[str(MALFORMED)]))
    config.add(McpServer(name="bad", command=sys.executable, args=[str(MALFORMED), "--good-list"]))
    with McpHub(settings, config, timeouts=Timeouts(start_s=20, list_s=5, call_s=2)) as hub:
        with pytest.raises(McpServerError, match="'badlist' answered with a malformed reply while listing its tools"):
            hub.tools("badlist")
        assert [t.name for t in hub.tools("bad")] == ["shape", "noise"]
        with pytest.raises(McpServerError, match="'bad' answered with a malformed reply while calling 'shape'"):
            hub.call("bad", "shape")
        started = time.monotonic()
        with pytest.raises(McpTimeout, match="'bad' did not answer within 2 s while calling 'noise'"):
            hub.call("bad", "noise")
        assert time.monotonic() - started < 2 + 8


def test_threads_may_call_at_once_even_while_the_server_is_starting(tmp_path):
    import concurrent.futures

    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    config = McpConfig(settings)
    config.add(stdio_server("calc"))
    with McpHub(settings, config, timeouts=Timeouts(start_s=60)) as hub, \
            concurrent.futures.ThreadPoolExecutor(8) as pool:
        sums = list(pool.map(lambda n: hub.call("calc", "add", {"a": n, "b": 1000}).text, range(16)))
        assert sums == [str(n + 1000) for n in range(16)]
        assert len([s for s in hub.statuses() if s.state == "running"]) == 1


def test_cancel_returns_from_a_running_call_at_once(hub):
    import threading

    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    started = time.monotonic()
    with pytest.raises(McpServerError, match="cancelled"):
        hub.call("b", "hang", cancel=cancel)  # its bound is 3 s: returning in well under that is the cancel
    assert time.monotonic() - started < 2.0
