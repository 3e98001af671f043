"""Start the test MCP server (``mcp_server.py``): as an ``McpServer`` entry for stdio, or as a real
Streamable HTTP process on a free loopback port."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from fireside.engine.mcp import McpServer
from tests.helpers.waiting import free_port

SCRIPT = Path(__file__).with_name("mcp_server.py")


def stdio_server(name: str = "tests") -> McpServer:
    return McpServer(name=name, command=sys.executable, args=[str(SCRIPT)])


@contextlib.contextmanager
def http_server(token: str | None = None) -> Iterator[str]:
    """The test server over Streamable HTTP; yields its URL and stops it afterwards."""
    port = free_port()
    cmd = [sys.executable, str(SCRIPT), "--http", str(port)] + (["--token", token] if token else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the test MCP server exited: {proc.stderr.read().decode()[-2000:]}")
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the test MCP server did not start listening") from None
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
