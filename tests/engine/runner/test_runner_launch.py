"""A runner starts both ways Fireside starts one: ``python -m fireside.engine.runner`` (what
``runner_command()`` gives an installed or source Fireside) and the frozen bundle's entry script with
``--fireside-runner``. Each is a real process that answers on its pipe with its hello frame and ends when
the pipe closes."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from fireside.engine.protocol import FramedPipe
from fireside.engine.runtime.client import runner_command

ENTRY = Path(__file__).resolve().parents[3] / "installers" / "entry.py"


@pytest.mark.parametrize("command", [runner_command(), [sys.executable, str(ENTRY), "--fireside-runner"]],
                         ids=["python -m", "frozen entry"])
def test_a_runner_starts_says_hello_and_ends_with_its_pipe(command):
    done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    hello = FramedPipe(io.BytesIO(done.stdout), io.BytesIO()).recv()
    assert hello["type"] == "hello" and hello["pid"] > 0
