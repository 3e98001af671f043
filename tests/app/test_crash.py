"""A SIGKILL of the app mid-reply loses nothing the user saw: the question and every word of the reply
shown before the kill are there after a restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from fireside.engine.settings import Settings

pytestmark = [pytest.mark.gui, pytest.mark.model]
ROOT = Path(__file__).resolve().parents[2]


def _kill_after_shown(home: Path, batches: int) -> dict:
    env = {**os.environ, "FIRESIDE_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "tests.app.crash_driver", "Tell me a long story about a fox."],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    last = None
    try:
        for seen, line in enumerate(proc.stdout, 1):
            last = json.loads(line)
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

