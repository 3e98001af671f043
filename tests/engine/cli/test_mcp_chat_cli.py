"""`fireside chat --tools` as a user drives it: the real starter model, the real test MCP server, and
answers typed at the approval prompt."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.mcp_fixtures import SCRIPT

pytestmark = pytest.mark.model


def test_each_call_is_shown_with_its_arguments_and_runs_only_when_approved(fireside_home):
    fireside = [sys.executable, "-m", "fireside.engine"]
    subprocess.run([*fireside, "mcp", "add", "tests", "--", sys.executable, str(SCRIPT)], check=True,
                   capture_output=True, timeout=60)
    typed = "What is the weather in Paris?\ny\nAnd in Oslo?\nn\n/bye\n"
    out = subprocess.run([*fireside, "chat", "starter", "--tools", "--server", "tests", "--tool-choice", "weather",
                          "--max-steps", "1", "--max-tokens", "40", "--seed", "1", "--temperature", "0",
                          "--ctx", "2048"], input=typed, capture_output=True, text=True, timeout=500)
    assert out.returncode == 0, out.stderr
    calls = out.stderr.split("[tool call] ")[1:]
    assert len(calls) == 2
    assert calls[0].startswith('server tests, tool weather, arguments:\n  {\n    "city": "Paris"\n  }\n')
    assert "[tool run: weather]\nForecast for Paris: sunny, 21 C (station MCP-7731)" in calls[0]
    assert "[tool denied: weather]\nThe user denied this call" in calls[1] and "MCP-7731" not in calls[1]
