"""``fireside serve`` as a user starts it: a subprocess on a free loopback port, stopped by SIGTERM
(so its shutdown runs as it does on Ctrl-C or a service stop), for tests that restart the server."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(home: Path, *args: str, timeout: float = 180) -> Iterator[str]:
    """Run ``fireside serve`` with ``FIRESIDE_HOME=home`` until the block ends; yields its base URL."""
    port = free_port()
    env = {**os.environ, "FIRESIDE_HOME": str(home)}
    log = (home / f"serve-{port}.log")
    home.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "serve", "--port", str(port), *args],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"fireside serve exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"fireside serve did not answer in {timeout:.0f} s")
            time.sleep(0.2)
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
