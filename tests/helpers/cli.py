"""The ``fireside`` command as a user runs it: a subprocess of this interpreter, output captured."""

from __future__ import annotations

import subprocess
import sys


def fireside(*args: str, timeout: float = 240, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fireside.engine", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
