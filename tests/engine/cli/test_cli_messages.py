"""What the ``fireside`` command prints on standard error when the hub cannot be reached: its own one
sentence, never a library's timestamped log line (those come with ``--verbose``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from fireside.engine.bench.targets import wait_until_serving
from tests.helpers.cli import fireside
from tests.helpers.waiting import free_port

TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d")


@pytest.fixture
def offline(fireside_home, monkeypatch):
    """The hub's address is a loopback port nothing listens on; returns the environment for subprocesses."""
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("FIRESIDE_LOG", raising=False)
    return dict(os.environ)


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and not TIMESTAMP.search(stderr), stderr
    return lines[0]


def test_search_offline_says_one_sentence_at_once(offline):
    started = time.monotonic()
    out = fireside("search", "qwen", env=offline, timeout=60)
    assert out.returncode == 1 and one_line(out.stderr).startswith("fireside: cannot reach the hub at http://127.0.0.1:")
    assert time.monotonic() - started < 20  # huggingface_hub's backoff took 25 s before the sentence came


def test_pull_run_and_serve_offline_say_one_sentence(offline):
    out = fireside("pull", "bartowski/Qwen3-0.6B-GGUF:Q4_K_M", env=offline, timeout=60)
    assert out.returncode == 1 and one_line(out.stderr).startswith("fireside: cannot reach the hub")
    out = fireside("run", "bartowski/Qwen3-0.6B-GGUF:Q4_K_M", "hi", env=offline, timeout=60)
    assert out.returncode == 1 and one_line(out.stderr).startswith("fireside: no model named")
    out = fireside("serve", "--port", str(free_port()), "--load", "qwen3-0.6b:q4_k_m", env=offline, timeout=60)
    assert out.returncode == 1 and one_line(out.stderr).startswith("fireside: no model named")


def test_serve_prints_nothing_on_stderr_and_fireside_log_shows_the_log(offline):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "serve", "--port", str(port)], env=offline,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_serving(proc, f"http://127.0.0.1:{port}", timeout=120)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert f"Fireside API on http://127.0.0.1:{port}" in out and err == ""

    out = fireside("pull", "bartowski/Qwen3-0.6B-GGUF:Q4_K_M", env={**offline, "FIRESIDE_LOG": "debug"}, timeout=60)
    logged = [line for line in out.stderr.splitlines() if TIMESTAMP.match(line)]
    assert out.returncode == 1 and any("connect_tcp" in line for line in logged), out.stderr  # on request
    assert out.stderr.splitlines()[-1].startswith("fireside: cannot reach the hub")


def test_version_says_which_fireside_and_binding_this_is():
    """Issue 45: ``fireside --version`` did not exist (argparse said "unrecognized arguments")."""
    from importlib.metadata import version

    out = fireside("--version", timeout=60)
    assert out.returncode == 0 and out.stdout.startswith(f"fireside {version('fireside')} (llama-cpp-python ")
