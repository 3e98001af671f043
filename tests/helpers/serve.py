"""``fireside serve`` as a user starts it: a subprocess on a free loopback port, stopped by SIGTERM
(so its shutdown runs as it does on Ctrl-C or a service stop), for tests that restart the server."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from fireside.engine.bench.targets import wait_until_serving
from fireside.engine.procs import stop_process
from tests.helpers.waiting import free_port


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
        try:
            wait_until_serving(proc, url, timeout)
        except RuntimeError as exc:
            raise RuntimeError(f"fireside serve: {exc}: {log.read_text()[-2000:]}") from None
        yield url
    finally:
        stop_process(proc, grace_s=60)
