"""`fireside chat` and `fireside run` as a user drives them, with the real starter model."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model


def test_run_prints_one_reply_for_scripts():
    out = subprocess.run([sys.executable, "-m", "fireside.engine", "run", "starter", "Say hello.", "--max-tokens", "12",
                          "--seed", "1", "--ctx", "1024"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_run_keeps_a_thread_count_the_user_gave_and_says_so():
    out = subprocess.run([sys.executable, "-m", "fireside.engine", "run", "starter", "Count to twenty.", "--max-tokens",
                          "24", "--seed", "1", "--ctx", "1024", "--threads", "1", "--stats"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # what the model writes (how many tokens before it ends) is one CPU's arithmetic; the count it kept is not
    assert re.search(r"\b\d+ tokens?, .*\b1 thread \(fixed\)", out.stderr), out.stderr


def test_ctrl_c_stops_the_reply_and_the_next_prompt_works():
    proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "chat", "starter", "--ctx", "1024", "--seed", "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, like a terminal's foreground job
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(1), "")), daemon=True)
    reader.start()
    try:
        proc.stdin.write("Write a very long essay about the history of the ocean.\n")
        proc.stdin.flush()
        wait_until(lambda: len("".join(out)) >= 40, 60)  # the reply is streaming
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C reaches the whole group, the runner too
        wait_until(lambda: "[stopped]" in "".join(out), 30)
        assert "[stopped]" in "".join(out)
        stopped_at = len("".join(out))
        proc.stdin.write("Now say hi.\n/bye\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
        reader.join(timeout=5)
        second = "".join(out)[stopped_at:].replace(">>> ", "")
        assert second.strip(), "the next prompt got a reply"
    finally:
        if proc.poll() is None:
            proc.kill()


def test_ps_lists_what_a_running_server_has_loaded(tmp_path):
    from fireside.engine.models.fitplan import LoadOptions
    from fireside.engine.runtime.runtime import Runtime
    from fireside.engine.server import ServerThread, create_app
    from fireside.engine.settings import Settings

    env = {**os.environ, "FIRESIDE_HOME": str(tmp_path)}
    settings = Settings.from_env(env)
    runtime = Runtime(settings, idle_ttl_s=0)
    server = ServerThread(create_app(runtime, settings), "127.0.0.1", 0)
    server.start()
    try:
        ps = [sys.executable, "-m", "fireside.engine", "ps"]
        env["FIRESIDE_PORT"] = str(server.port)
        empty = subprocess.run(ps, capture_output=True, text=True, timeout=60, env=env)
        assert "no models loaded" in empty.stdout
        runtime.load("starter", LoadOptions(context=1024))
        out = subprocess.run(ps, capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        row = next(line for line in out.stdout.splitlines() if line.startswith("starter"))
        assert "100% CPU" in row and "1024" in row
        cores = runtime.loaded()[0].thread_share
        assert f"{cores} thread" in row  # the threads it uses (all the cores, until it measures fewer are faster)
    finally:
        server.stop()
        runtime.close()
    gone = subprocess.run(ps, capture_output=True, text=True, timeout=60, env=env)
    assert "no Fireside server answers" in gone.stdout
