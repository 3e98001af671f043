"""The Server page's snippets for the coding agents: a command a person can paste, pointing
``fireside launch`` at this server, with the key when one is required."""

from __future__ import annotations

import shlex

from fireside.app.windows.snippets import SNIPPETS, snippet
from fireside.engine.agents import AGENTS
from fireside.engine.cli import build_parser


def test_each_agent_has_a_launch_command_the_cli_accepts():
    url = "http://127.0.0.1:8765"
    commands = {}
    for title in ("Claude Code", "Codex CLI", "opencode"):
        assert title in SNIPPETS
        text = snippet(title, url, "", "qwen3-4b")
        commands[title] = [line for line in text.splitlines() if not line.startswith("#")]
    assert sorted(shlex.split(lines[0])[2] for lines in commands.values()) == sorted(AGENTS)
    for lines in commands.values():
        args = build_parser().parse_args(shlex.split(lines[0])[1:])  # the command line parses as written
        assert (args.model, args.url) == ("qwen3-4b", url) and args.agent in AGENTS


def test_the_key_goes_with_the_command_when_the_server_needs_one():
    text = snippet("Codex CLI", "http://10.0.0.2:8765", "sekrit")
    assert "FIRESIDE_API_KEY=sekrit fireside launch codex --model starter --url http://10.0.0.2:8765" in text
