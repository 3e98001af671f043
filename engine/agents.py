"""Coding agents on Fireside: what Claude Code, Codex CLI and opencode need from a model, and the
settings that point each one at a Fireside server without touching the user's own.

Each ``Agent`` names its npm package and command, the API dialect it speaks, and the size of its first
request: the system prompt and tool definitions it sends before the user has typed anything, measured
with the starter model's tokenizer from the agent's own request (other tokenizers count within about
a tenth of it). ``context_for`` turns that into the context to load a model with: enough for the
first request and a reply (``need``), and room for the conversation to grow (``want``, a power of two
the model was trained on when it can be). ``configure`` writes the agent's settings into a folder of
its own (a temporary home) and returns the environment that points the agent there and at the server:
``CLAUDE_CONFIG_DIR`` for Claude Code, ``CODEX_HOME`` for Codex, ``OPENCODE_CONFIG`` for opencode;
the user's ``~/.claude``, ``~/.codex`` and ``~/.config/opencode`` are never written. ``fireside
launch`` (``cli/launch.py``) runs them; the app's Server page shows the command.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPLY_ROOM = 4096  # tokens a context must hold past the first request: the reply, a tool result or two
GROWTH = 8192  # and what the conversation should have to grow into before the agent compacts it
SIZES = (16384, 32768, 65536, 131072)
NO_KEY = "fireside"  # what an agent sends when the server needs no key (every agent insists on one)


@dataclass(frozen=True)
class Agent:
    name: str  # the command word: ``fireside launch NAME``
    title: str
    package: str  # the npm package that installs it
    command: str  # the program it installs
    dialect: str  # the API it speaks to Fireside
    first_request: int  # tokens of its first request (measured: see the module docstring)
    measured: str  # what was measured: the version and what the request holds

    @property
    def need(self) -> int:
        """The least context the agent can work in: its first request and a reply."""
        return self.first_request + REPLY_ROOM


AGENTS = {a.name: a for a in (
    Agent("claude", "Claude Code", "@anthropic-ai/claude-code", "claude", "Anthropic Messages", 22_600,
          "Claude Code 2.1.197: its system prompt, 25 tools and the list of agents and skills"),
    Agent("codex", "Codex CLI", "@openai/codex", "codex", "OpenAI Responses", 9_000,
          "Codex CLI 0.171.0: its instructions, skills and 13 tools (5 of them in a namespace)"),
    Agent("opencode", "opencode", "opencode-ai", "opencode", "OpenAI Chat Completions", 7_600,
          "opencode 1.18.33: its system prompt and 10 tools"),
)}


def context_for(agent: Agent, trained: int) -> int:
    """The context to load a model trained on ``trained`` tokens with for ``agent``: the smallest of
    ``SIZES`` that leaves ``GROWTH`` past the first request, or the trained context if that is less
    (but never less than ``agent.need``: the caller refuses a model trained on less)."""
    want = next((s for s in SIZES if s >= agent.first_request + GROWTH), SIZES[-1])
    return max(agent.need, min(want, trained))


def refusal(agent: Agent, trained: int, model: str) -> str | None:
    """Why ``model`` (trained on ``trained`` tokens) cannot serve ``agent``, in numbers; None if it can."""
    if trained >= agent.need:
        return None
    return (f"{model} was trained on {trained:,} tokens of context, but {agent.title}'s first request alone is "
            f"about {agent.first_request:,} tokens ({agent.measured}), and a reply needs room after it: it needs "
            f"a model trained on at least {agent.need:,} tokens. Choose a larger model with --model, or "
            f"force a longer context with --ctx {next(s for s in SIZES if s >= agent.need)} (past what it was "
            f"trained on, its answers degrade)")


def configure(agent: Agent, home: Path, url: str, key: str | None, model: str, n_ctx: int) -> dict[str, str]:
    """Write ``agent``'s settings for the server at ``url`` (its root, no ``/v1``) into ``home`` and
    return the environment variables to run it with (added to the caller's environment)."""
    home.mkdir(parents=True, exist_ok=True)
    return {"claude": _claude, "codex": _codex, "opencode": _opencode}[agent.name](home, url, key or NO_KEY, model,
                                                                               n_ctx)


def _claude(home: Path, url: str, key: str, model: str, n_ctx: int) -> dict[str, str]:
    config = home / "claude"
    config.mkdir(exist_ok=True)
    # the first-run screens, and the question whether to use the key from the environment, answered
    state = {"hasCompletedOnboarding": True, "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []}}
    (config / ".claude.json").write_text(json.dumps(state), encoding="utf-8")
    env = {"CLAUDE_CONFIG_DIR": str(config), "ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": key,
           "ANTHROPIC_MODEL": model, "CLAUDE_CODE_SUBAGENT_MODEL": model,
           # a long prompt on a CPU takes minutes before the first token: the stream pings meanwhile, and
           # its watchdogs (which may count only content, not pings) wait an hour, not five minutes
           "API_TIMEOUT_MS": "3600000", "CLAUDE_STREAM_IDLE_TIMEOUT_MS": "3600000",
           "CLAUDE_BYTE_STREAM_IDLE_TIMEOUT_MS": "3600000",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"}
    # its background requests ask for a small model by name ("haiku"): the same model here
    env.update({f"ANTHROPIC_DEFAULT_{tier}_MODEL": model for tier in ("OPUS", "SONNET", "HAIKU")})
    env["ANTHROPIC_SMALL_FAST_MODEL"] = model
    return env


def _codex(home: Path, url: str, key: str, model: str, n_ctx: int) -> dict[str, str]:
    config = home / "codex"
    config.mkdir(exist_ok=True)
    lines = [f"model = {json.dumps(model)}", 'model_provider = "fireside"', f"model_context_window = {n_ctx}",
             "", "[model_providers.fireside]", 'name = "Fireside"', f"base_url = {json.dumps(url + '/v1')}",
             'env_key = "FIRESIDE_API_KEY"', 'wire_api = "responses"',
             # a Responses stream is silent while a long prompt is evaluated: wait for it (an hour)
             "stream_idle_timeout_ms = 3600000", ""]
    (config / "config.toml").write_text("\n".join(lines), encoding="utf-8")
    return {"CODEX_HOME": str(config), "FIRESIDE_API_KEY": key}


def _opencode(home: Path, url: str, key: str, model: str, n_ctx: int) -> dict[str, str]:
    path = home / "opencode.json"
    config = {"$schema": "https://opencode.ai/config.json", "model": f"fireside/{model}",
              "small_model": f"fireside/{model}", "autoupdate": False, "share": "disabled",
              "provider": {"fireside": {"npm": "@ai-sdk/openai-compatible", "name": "Fireside",
                                        "options": {"baseURL": url + "/v1", "apiKey": "{env:FIRESIDE_API_KEY}"},
                                        "models": {model: {"name": model, "tool_call": True,
                                                           "limit": {"context": n_ctx, "output": REPLY_ROOM}}}}}}
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return {"OPENCODE_CONFIG": str(path), "FIRESIDE_API_KEY": key}


def launch_command(agent: str, model: str = "starter", url: str | None = None) -> str:
    """The command that starts ``agent`` on ``model``, as the Server page offers it to copy."""
    return f"fireside launch {agent} --model {model}" + (f" --url {url}" if url else "")
