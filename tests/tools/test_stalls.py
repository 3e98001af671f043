"""The suite's own report of a timed-out test (tests/helpers/stalls.py): where that test's thread waited
comes last in the log, after every other thread's dump, so a log cut to its tail still shows it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_timed_out_fixture_is_named_with_the_line_it_waited_on_after_the_thread_dumps(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_stuck.py").write_text(
        "import threading, pytest\n"
        "@pytest.fixture\n"
        "def stuck():\n"
        "    threading.Thread(target=threading.Event().wait, name='bystander', daemon=True).start()\n"
        "    threading.Event().wait()  # the wait\n"
        "def test_waits(stuck):\n"
        "    pass\n"
        "def test_fine():\n"
        "    pass\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.helpers.stalls", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-o", "timeout=2", "test_stuck.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    out = run.stdout
    assert run.returncode == 1 and "1 passed, 1 error" in out
    block = out[out.index("where each timed-out test waited"):]
    assert "test_stuck.py::test_waits (setup):" in block and "test_stuck.py:5 in stuck" in block
    assert out.rindex("Stack of bystander") < out.index("where each timed-out test waited")
    assert "_pytest" not in block and "pluggy" not in block
