"""Ending a child process: asked first (SIGTERM, so its ``finally`` blocks and shutdown run), then made to
(SIGKILL) when it has not ended within its grace. The launcher's server, the lending worker and the
tests' servers all stop their children this way."""

from __future__ import annotations

import signal
import subprocess


def stop_process(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM ``proc``, wait up to ``grace_s``, then SIGKILL it and reap it. Nothing if it already ended."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
