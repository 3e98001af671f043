"""`fireside mcp add|ls|tools|call|rm` as a user drives them, against the real test MCP server."""

from __future__ import annotations

import json
import sys

from fireside.engine.cli import main
from fireside.engine.settings import Settings
from tests.helpers.mcp_fixtures import SCRIPT, http_server


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["mcp", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_add_shows_the_exact_command_then_ls_tools_call_and_rm_work(capsys):
    code, out, _ = run(capsys, "add", "calc", "--env", "GREETING=hi there", "--", sys.executable, str(SCRIPT),
                       "--flag-for-the-server")
    assert code == 0
    assert f"GREETING='hi there' {sys.executable} {SCRIPT} --flag-for-the-server" in out
    assert "with your rights" in out
    saved = json.loads((Settings.from_env().config_dir / "mcp.json").read_text())["mcpServers"]["calc"]
    assert saved == {"command": sys.executable, "args": [str(SCRIPT), "--flag-for-the-server"],
                     "env": {"GREETING": "hi there"}}


def test_tools_and_call_print_what_the_server_says(capsys):
    assert run(capsys, "add", "calc", "--", sys.executable, str(SCRIPT))[0] == 0
    code, out, _ = run(capsys, "tools", "calc")
    assert code == 0 and "add  Add two integers." in out.splitlines()
    code, out, _ = run(capsys, "call", "calc", "add", '{"a": 20, "b": 22}')
    assert (code, out) == (0, "42\n")
    code, out, err = run(capsys, "call", "calc", "add", '{"a": "x", "b": 1}')
    assert code == 1 and "validation error" in out and "add reported an error" in err
    code, _, err = run(capsys, "call", "calc", "add", "{not json")
    assert code == 1 and "not valid JSON" in err
    code, out, _ = run(capsys, "ls")
    assert code == 0 and "7 tools" in out
    code, out, _ = run(capsys, "rm", "calc")
    assert code == 0 and "removed MCP server calc" in out
    code, _, err = run(capsys, "tools", "calc")
    assert code == 1 and "no MCP server named 'calc'" in err


def test_http_server_with_a_token_and_ls_reports_a_dead_one(capsys, memory_keyring):
    with http_server(token="t0k") as url:
        code, out, _ = run(capsys, "add", "web", "--url", url, "--token", "t0k")
        assert code == 0 and "token in the OS keyring" in out
        assert run(capsys, "add", "dead", "--url", "http://127.0.0.1:9/mcp")[0] == 0
        code, out, _ = run(capsys, "call", "web", "echo", '{"text": "over http"}')
        assert (code, out) == (0, "over http\n")
        code, out, _ = run(capsys, "ls", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["web"]["tools"] == 7 and rows["dead"]["tools"] is None
    assert rows["dead"]["status"].startswith("failed: MCP server 'dead' could not start")


def test_add_refuses_both_or_neither_transport(capsys):
    code, _, err = run(capsys, "add", "x", "--url", "http://127.0.0.1:1/mcp", "--", "cmd")
    assert code == 1 and "either a command after -- " in err
    code, _, err = run(capsys, "add", "x")
    assert code == 1 and "either a command" in err


def test_import_copies_claude_desktop_and_lm_studio_servers_and_shows_their_commands(capsys, tmp_path,
                                                                                      monkeypatch):
    home = tmp_path / "home"
    claude = home / ".config/Claude/claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
        "old": {"url": "http://127.0.0.1:9/sse"}}}))
    lms = home / ".lmstudio/mcp.json"
    lms.parent.mkdir(parents=True)
    lms.write_text(json.dumps({"mcpServers": {"files": {"command": "other"},
                                              "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}}}}))
    monkeypatch.setenv("HOME", str(home))
    code, out, _ = run(capsys, "import")
    assert code == 0
    assert "added files: npx -y @modelcontextprotocol/server-filesystem /srv" in out
    assert "skipped old: MCP server 'old' uses the old SSE transport" in out
    assert "kept files: Fireside already has a server by that name" in out and "added web:" in out
    servers = json.loads((Settings.from_env().config_dir / "mcp.json").read_text())["mcpServers"]
    assert servers == {"files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]},
                       "web": {"url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}}}
    code, out, _ = run(capsys, "import", str(lms), "--replace")
    assert code == 0 and "added files: other" in out
