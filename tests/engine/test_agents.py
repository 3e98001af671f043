"""The real coding agents from npm (Claude Code, Codex CLI, opencode) against ``fireside serve`` with the
starter at a 32k context, all inside a network namespace that has only loopback: each answers a
non-interactive turn (exit 0, a reply on stdout), a wrong key stops each within seconds with the key's
message, and ``fireside launch`` starts a server, runs one on it and stops the server after. Skipped, with the reason, where the
agents are not installed (see ``tests/helpers/agents.py``) or namespaces cannot be made."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from fireside.engine.agents import AGENTS, configure
from fireside.engine.procs import stop_process
from tests.helpers import agents, netns

pytestmark = pytest.mark.model
KEY = "agents-test-key"
PORT = 18766
URL = f"http://127.0.0.1:{PORT}"
CTX = 32768


@pytest.fixture(scope="module")
def served(tmp_path_factory, smollm2_path):
    """(namespace, device): ``fireside serve`` with the starter loaded at CTX, behind KEY, in a namespace."""
    reason = netns.why_not()
    if reason:
        pytest.skip(reason)
    if all(agents.program(a.command) is None for a in AGENTS.values()):
        pytest.skip(" and ".join(agents.why_missing(a.command, a.package) for a in AGENTS.values()))
    with agents.loopback_namespace() as ns:
        device = netns.Device(ns, tmp_path_factory.mktemp("agents-server"))
        with device.serve("--port", str(PORT), "--ctx", str(CTX), "--parallel", "2", "--api-key", KEY,
                          "--load", "starter", "--keep-alive", "-1", timeout=180):
            yield ns, device


def run_agent(ns: str, name: str, home, key: str) -> tuple[subprocess.CompletedProcess, float]:
    agent = AGENTS[name]
    reason = agents.why_missing(agent.command, agent.package)
    if reason:
        pytest.skip(reason)
    env = {**os.environ, **agents.private_env(home), **agents.small_env(name),
           **configure(agent, home / "agent", URL, key, "starter", CTX)}
    argv = ["ip", "netns", "exec", ns, str(agents.program(agent.command)), *agents.small(name, home / "agent")]
    start = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, cwd=home, stdin=subprocess.DEVNULL)
    return done, time.monotonic() - start


@pytest.mark.parametrize("name", ["codex", "opencode"])  # Claude Code answers through launch, below
def test_the_agent_answers_a_turn(served, name, tmp_path):
    done, _ = run_agent(served[0], name, tmp_path, KEY)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.strip(), done.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_wrong_key_stops_the_agent_at_once_with_the_keys_message(served, name, tmp_path):
    done, took = run_agent(served[0], name, tmp_path, "wrong-key")
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "API key" in said, said[-2000:]
    assert took < 60, f"{name} took {took:.0f} s to give up on a wrong key"  # Claude Code retried for minutes


def test_launch_starts_a_server_runs_the_agent_and_stops_the_server(served, tmp_path):
    """No server answers where launch looks (FIRESIDE_PORT): it starts one with the starter at the
    context asked for (asking for the key ``fireside serve`` keeps in the keyring, as the user's
    ``--api-key`` gives it), runs Claude Code on it, and stops it when Claude Code exits."""
    ns, device = served
    claude = agents.program("claude")
    if claude is None:
        pytest.skip(agents.why_missing("claude", AGENTS["claude"].package))
    env = {**device.env, **agents.private_env(tmp_path), **agents.small_env("claude"), "FIRESIDE_PORT": str(PORT + 1),
           "PATH": f"{claude.parent}{os.pathsep}{os.environ['PATH']}"}
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "fireside.engine", "launch", "claude", "--model",
            "starter", "--ctx", str(CTX), "--api-key", KEY, "--", *agents.small("claude", tmp_path)]
    done = _run_ended_by_sigterm(argv, env=env, cwd=tmp_path, timeout=240)
    assert done.returncode == 0 and done.stdout.strip(), done.stdout[-2000:] + done.stderr[-2000:]
    started = re.search(r"starting a server at (http://\S+) with starter", done.stderr)
    assert started and f"Claude Code on starter ({CTX:,} tokens of context)" in done.stderr, done.stderr
    assert "its KV cache is f16" in done.stderr  # the agent's long prompts evaluate 2.3x faster than on q8_0
    with pytest.raises(httpx.ConnectError):  # the server it started is gone with the agent
        netns.in_netns(ns, httpx.get, f"{started.group(1)}/v1/models", timeout=5)


def _run_ended_by_sigterm(argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run``, but past ``timeout`` launch gets SIGTERM (and a grace to stop the server it
    started in a session of its own) before the test fails: a SIGKILL would leave that server and
    the agent running, taking the CPU from the rest of the run."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                          **kwargs) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process(proc, grace_s=45)  # launch's few lines of output fit its pipes meanwhile
            try:
                out, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # an agent launch could not stop still holds them open
                out, err = "", ""
            kept = re.search(r"the server's log is kept at (\S+)", err)
            log = Path(kept.group(1)).read_text(errors="replace")[-3000:] if kept else ""
            pytest.fail(f"launch ran past {timeout:.0f} s:\n{out[-2000:]}{err[-2000:]}\nthe server's log:\n{log}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
