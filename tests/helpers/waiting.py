"""Ports and waiting, for tests that start servers and watch other threads or processes.

Qt tests wait with ``qtbot.waitUntil`` / ``qtbot.waitSignal``; these are for the rest: a test that
polls a server or a file from plain Python, never with a bare ``sleep`` standing in for a condition.
"""

from __future__ import annotations

import time

from fireside.engine.bench.targets import free_port  # the benchmarks' own, so the two cannot drift


def closed_port_url() -> str:
    """An http:// URL on loopback where nothing answers: a dead server."""
    return f"http://127.0.0.1:{free_port()}"


def wait_until(predicate, timeout: float) -> float:
    """Poll ``predicate`` until true; return the seconds it took (fails the test on timeout)."""
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, "timed out waiting"
        time.sleep(0.01)
    return time.monotonic() - started
