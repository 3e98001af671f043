"""`fireside launch` as a user runs it: it says, with the numbers, when the model, the memory or the server
found cannot serve the agent, and starts nothing then; and the settings it writes point the agent at
Fireside from a folder of their own. The agents themselves run in ``tests/engine/test_agents.py``."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

import pytest

from fireside.engine.agents import AGENTS, configure
from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.cli import fireside


@pytest.fixture
def agent_on_path(tmp_path):
    """A ``claude``, ``codex`` and ``opencode`` on PATH that only note that they were run: a refused
    launch must start none."""
    folder, ran = tmp_path / "bin", tmp_path / "ran"
    folder.mkdir()
    for name in AGENTS:
        script = folder / name
        script.write_text(f"#!/bin/sh\necho {name} >> {ran}\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "FIRESIDE_PORT": "1"}
    return env, ran


def test_a_model_trained_on_too_little_is_refused_with_the_numbers(agent_on_path):
    env, ran = agent_on_path
    out = fireside("launch", "claude", "--model", "starter", env=env)
    assert out.returncode == 1 and not ran.exists()
    assert "trained on 8,192 tokens" in out.stderr and "22,600 tokens" in out.stderr and "--ctx 32768" in out.stderr
    small = fireside("launch", "claude", "--ctx", "8192", env=env)
    assert small.returncode == 1 and "--ctx 8,192 is too small" in small.stderr and not ran.exists()


def test_a_context_memory_cannot_hold_is_refused_with_the_plan(agent_on_path):
    env, ran = agent_on_path
    out = fireside("launch", "opencode", "--ctx", "50000000", env=env)
    assert out.returncode == 1 and not ran.exists()
    assert "does not fit in this machine's memory" in out.stderr and "RAM" in out.stderr


def test_a_server_with_too_short_a_context_is_refused(agent_on_path, tmp_path, smollm2_path):
    env, ran = agent_on_path
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    library = Library(settings)
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    server = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    server.start()
    try:
        out = fireside("launch", "codex", "--model", "starter", "--url", server.url, env=env)
    finally:
        server.stop()
        runtime.close()
    assert out.returncode == 1 and not ran.exists()
    assert "loaded with 8,192 tokens of context" in out.stderr and "at least 13,096" in out.stderr


def test_the_settings_point_at_fireside_from_a_folder_of_their_own(tmp_path):
    url, home = "http://127.0.0.1:9999", tmp_path / "launch"
    claude = configure(AGENTS["claude"], home, url, "k", "qwen", 32768)
    assert claude["ANTHROPIC_BASE_URL"] == url and claude["ANTHROPIC_API_KEY"] == "k"
    assert claude["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == "qwen" and claude["CLAUDE_CONFIG_DIR"].startswith(str(home))
    codex = configure(AGENTS["codex"], home, url, None, "qwen", 32768)
    config = (home / "codex" / "config.toml").read_text().splitlines()
    assert codex["CODEX_HOME"] == str(home / "codex") and codex["FIRESIDE_API_KEY"]  # codex insists on a key
    assert 'model = "qwen"' in config and "model_context_window = 32768" in config
    assert config.index("[model_providers.fireside]") < config.index(f'base_url = "{url}/v1"')
    opencode = configure(AGENTS["opencode"], home, url, "k", "qwen", 16384)
    provider = json.loads((home / "opencode.json").read_text())["provider"]["fireside"]
    assert opencode["OPENCODE_CONFIG"] == str(home / "opencode.json") and provider["options"]["baseURL"] == f"{url}/v1"
    assert provider["models"]["qwen"]["limit"]["context"] == 16384
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch"]  # nothing written outside its folder


@pytest.mark.model
def test_a_launch_ended_by_sigterm_stops_its_agent_and_the_server_it_started(tmp_path, smollm2_path):
    """A closed terminal or a `kill` ends launch as Ctrl-C does: the server it started (in a session of its
    own, its model kept loaded) must not go on running with nobody to talk to, and its log is kept."""
    import signal
    import subprocess
    import sys
    import time

    import httpx

    folder, seen = tmp_path / "bin", tmp_path / "seen"
    folder.mkdir()
    claude = folder / "claude"
    claude.write_text(f'#!/bin/sh\necho "$$ $ANTHROPIC_BASE_URL" > {seen}\nexec sleep 300\n')
    claude.chmod(claude.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "FIRESIDE_HOME": str(tmp_path / "home"),
           "FIRESIDE_PORT": "1"}
    launch = subprocess.Popen([sys.executable, "-m", "fireside.engine", "launch", "claude", "--model", "starter",
                               "--ctx", "32768"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while not (seen.exists() and seen.read_text().strip()):
            assert launch.poll() is None and time.monotonic() < deadline, launch.stderr.read() if launch.poll() else ""
            time.sleep(0.2)
        pid, url = seen.read_text().split()
        assert httpx.get(f"{url}/api/ps", timeout=5).status_code == 200  # the server it started is up
        launch.send_signal(signal.SIGTERM)
        assert launch.wait(timeout=60) != 0
        kept = re.search(r"the server's log is kept at (\S+)", launch.stderr.read())
        log = Path(kept.group(1)).read_text() if kept else ""  # the temporary home went, its log did not
        assert '"POST /api/generate HTTP/1.1" 200' in log  # with a line for each request (serve --verbose)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{url}/api/ps", timeout=5)
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    finally:
        if launch.poll() is None:
            launch.kill()
