"""The real coding agents, from npm, for the tests that run them against ``fireside serve``.

``.ci/run`` installs ``@anthropic-ai/claude-code``, ``@openai/codex`` and ``opencode-ai`` into
``$FIRESIDE_AGENTS_DIR`` (default ``~/.cache/fireside/agents``) with ``npm install --prefix``; each
ships a native program (``node_modules/.bin/claude``, ``codex``, ``opencode``) that runs offline.
``program`` finds one and checks that it starts (``--version``), ``why_missing`` says why not, for
a skip. ``loopback_namespace`` is a network namespace with only loopback up, so an agent run inside it
can reach the server beside it and nothing else.

The agents' own first requests are 7,600-22,600 tokens (``engine/agents.py``), minutes of prompt
evaluation for the starter on two cores, so the tests run them with the options each offers to keep
its prompt small (``SMALL``: Claude Code's ``--system-prompt`` and ``--tools ""``, Codex's
``model_instructions_file`` and features off, opencode's agent prompt and tools off), a few hundred
tokens each; what is tested is the agent's wire protocol against the server, not its prompt size.
Their replies are capped at ``REPLY`` tokens too (``small_env``, and opencode's model limit). Claude Code
asks for up to 32,000 tokens with no seed, so the reply is sampled afresh each run: the starter's ran to
5-344 tokens in forty runs here, and a rare one that rambles on would take minutes on two cores (one
CI run's launch test ran past its 240 s so, cause unseen). Capped, such a run fails within about a
minute (Claude Code continues a cut-off reply three times, then exits 1 naming the cap) instead.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import netns

AGENTS_DIR = Path(os.environ.get("FIRESIDE_AGENTS_DIR") or Path.home() / ".cache" / "fireside" / "agents")
PROMPT = "Say hi."
REPLY = 1024  # tokens an agent's reply may run to in the tests
CODEX_OFF = ("multi_agent", "goals", "apps", "plugins", "skill_search", "image_generation", "shell_tool",
             "tool_suggest")
OPENCODE_TOOLS = ("bash", "edit", "glob", "grep", "read", "skill", "task", "todowrite", "webfetch", "write",
                  "list", "patch", "todoread")


@functools.cache
def program(name: str) -> Path | None:
    path = AGENTS_DIR / "node_modules" / ".bin" / name
    if not path.exists():
        return None
    try:
        ok = subprocess.run([str(path), "--version"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return None
    return path if ok else None


def why_missing(name: str, package: str) -> str | None:
    if program(name) is None:
        return (f"{package} is not installed in {AGENTS_DIR} (`npm install --prefix {AGENTS_DIR} {package}`, "
                f"as .ci/run does; FIRESIDE_AGENTS_DIR names another folder)")
    return None


def small(name: str, home: Path) -> list[str]:
    """The agent's arguments for one non-interactive turn with a small prompt; for opencode, its
    config (written by ``agents.configure`` in ``home``) is trimmed the same way."""
    if name == "claude":
        return ["-p", PROMPT, "--system-prompt", "You are terse.", "--tools", "", "--no-session-persistence",
                "--disable-slash-commands", "--strict-mcp-config", "--setting-sources", ""]
    if name == "codex":
        instructions = home / "instructions.md"
        instructions.write_text("You are terse.", encoding="utf-8")
        flags = [f"model_instructions_file={json.dumps(str(instructions))}", "include_environment_context=false",
                 "include_apps_instructions=false", "skills.bundled.enabled=false",
                 *(f"features.{f}=false" for f in CODEX_OFF)]  # its web_search tool stays: the server drops it
        return ["exec", "--skip-git-repo-check", *(a for f in flags for a in ("-c", f)), PROMPT]
    config = home / "opencode.json"
    trimmed = json.loads(config.read_text(encoding="utf-8"))
    trimmed.update(tools=dict.fromkeys(OPENCODE_TOOLS, False), agent={"build": {"prompt": "You are terse."}})
    for model in trimmed["provider"]["fireside"]["models"].values():
        model["limit"]["output"] = REPLY
    config.write_text(json.dumps(trimmed), encoding="utf-8")
    return ["run", PROMPT]


def small_env(name: str) -> dict[str, str]:
    """The environment that caps the agent's reply at ``REPLY`` tokens, where it reads one. Codex has no
    such setting, and needs none so far: it sends no temperature (the server's 0.7), and its replies
    to the test's turn ran to 7-21 tokens in ten runs here."""
    return {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(REPLY)} if name == "claude" else {}


def private_env(home: Path) -> dict[str, str]:
    """HOME and the XDG folders in ``home``: an agent writes its sessions and caches there, not in the
    real user's home."""
    return {"HOME": str(home), **{f"XDG_{kind}_HOME": str(home / kind.lower())
                                  for kind in ("CONFIG", "DATA", "CACHE", "STATE")}}


@contextlib.contextmanager
def loopback_namespace() -> Iterator[str]:
    """A network namespace with loopback up and no other interface; deleted afterwards."""
    name = f"fs-{os.getpid()}-agents"
    for step in (("netns", "add", name), ("-n", name, "link", "set", "lo", "up")):
        done = netns._ip(*step)
        if done.returncode != 0:
            netns._ip("netns", "del", name)
            raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")
    try:
        yield name
    finally:
        netns._ip("netns", "del", name)
