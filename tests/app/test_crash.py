"""A SIGKILL of the app mid-reply loses nothing the user saw: the question and every word of the reply
shown before the kill are there after a restart."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fireside.engine.settings import Settings

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]


def _kill_after_shown(home: Path, batches: int) -> dict:
    env = {**os.environ, "FIRESIDE_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.app.crash_driver", "Tell me a long story about a fox."],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    last = None
    try:
        for seen, shown in enumerate(_lines(proc, deadline=time.monotonic() + 120), 1):
            if "error" in shown:
                pytest.fail(f"the app showed an error instead of a reply: {shown['error']}")
            last = shown
            if seen >= batches:
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert last is not None, "the app showed no reply text before the kill"
    for pid in last["runners"]:  # the orphaned runner sees its pipe close and exits
        try:
            psutil.Process(pid).wait(timeout=30)
        except psutil.NoSuchProcess:
            pass
    return last


def _lines(proc: subprocess.Popen, deadline: float):
    """The driver's JSON lines; fails at once, with its exit status, if the driver dies or goes quiet."""
    buffer = b""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)
        ready = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))[0]
        data = os.read(proc.stdout.fileno(), 65536) if ready else b""
        if not data:
            code = proc.poll()
            pytest.fail(f"the app {'exited with ' + str(code) if code is not None else 'went quiet'} "
                        "before showing enough reply text")
        buffer += data


def test_sigkill_mid_reply_keeps_everything_shown(qtbot, make_app, shared_runtime, tmp_path):
    home = tmp_path / "crash-home"
    last = _kill_after_shown(home, batches=4)
    app = make_app(shared_runtime, Settings.from_env({"FIRESIDE_HOME": str(home)}))
    store, page = app.ctx.store, app.window.chat
    thread = store.thread(page.conv_id)
    assert [m.role for m in thread] == ["user", "assistant"]
    assert thread[0].content == "Tell me a long story about a fox."
    assert thread[1].id == last["reply"]
    assert thread[1].content.startswith(last["text"]) and last["text"]
    assert thread[1].state == "stopped"
    assert last["text"][:20] in page.transcript.view(thread[1].id).body.toPlainText()

