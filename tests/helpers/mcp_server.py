"""A real MCP server for tests, written with the ``mcp`` SDK's FastMCP: well-behaved tools and ones that
misbehave on purpose. Run it as a script: over stdio by default, or ``--http PORT`` for Streamable HTTP
on 127.0.0.1 (``--token T`` then demands ``Authorization: Bearer T``)."""

from __future__ import annotations

import argparse
import os
import sys
import time

from mcp.server.fastmcp import FastMCP

MARKER = "MCP-7731"  # in the weather tool's answer, so a test can find it in a later prompt
BIG_CHARS = 1024 * 1024

mcp = FastMCP("fireside-test")
_weather_calls = [0]


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@mcp.tool()
def weather(city: str) -> str:
    """Today's weather forecast for a city."""
    _weather_calls[0] += 1
    return f"Forecast for {city}: sunny, 21 C (station {MARKER})"


@mcp.tool()
def weather_calls() -> int:
    """How many times this server has run the weather tool."""
    return _weather_calls[0]


@mcp.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    sys.stderr.write("test server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@mcp.tool()
def hang() -> str:
    """Never answer (blocks the whole server, as a stuck synchronous tool does)."""
    time.sleep(3600)
    return "unreachable"


@mcp.tool()
def big() -> str:
    """Return one megabyte of text."""
    return ("0123456789abcdef" * (BIG_CHARS // 16))[:BIG_CHARS]


def _bearer_only(app, token: str):
    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"bad or missing token"})
                return
        await app(scope, receive, send)
    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--token", help="demand this bearer token")
    args = parser.parse_args()
    if not args.http:
        mcp.run("stdio")
        return
    import uvicorn

    app = mcp.streamable_http_app()
    uvicorn.run(_bearer_only(app, args.token) if args.token else app, host="127.0.0.1", port=args.http,
                log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
