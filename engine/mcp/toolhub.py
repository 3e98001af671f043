"""The MCP hub: every configured tool server, reached through one private asyncio loop on its own thread.

The ``mcp`` SDK is asyncio; its callers (the CLI, the app bridge, the chat loop) are plain threads. The
hub owns one event loop on a daemon thread and offers a synchronous, thread-safe API on top of it:
``statuses()``, ``tools(name)``, ``all_tools()``, ``call(name, tool, arguments)`` and ``close()``. Each
server starts the first time it is needed and stays up until ``close()``; one that fails is started
afresh on its next use. A failing server never affects the others (see ``connection.py``).

Threading: every public method may be called from any thread except the hub's own; each blocks the
caller at most its timeout plus a few seconds for stopping a server that misbehaved, and ``call``
returns early when its ``cancel`` event is set.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ..errors import McpServerError, McpTimeout
from ..settings import Settings
from .config import McpConfig, McpServer
from .connection import Connection, Timeouts
from .results import DEFAULT_MAX_CHARS, McpTool, ToolResult

log = logging.getLogger(__name__)
_GRACE_S = 15.0  # beyond a call's own bound: the time a misbehaving server gets to be stopped


@dataclass
class ServerStatus:
    """A server as the user sees it: ``state`` is stopped, starting, running, failed or disabled."""

    server: McpServer
    state: str
    error: str = ""
    tools: list[McpTool] | None = None  # known once it has been listed


class McpHub:
    def __init__(self, settings: Settings, config: McpConfig | None = None, *, timeouts: Timeouts | None = None,
                 max_result_chars: int = DEFAULT_MAX_CHARS):
        self.settings = settings
        self.config = config or McpConfig(settings)
        self.timeouts = timeouts or Timeouts()
        self.max_result_chars = max_result_chars
        self._conns: dict[str, Connection] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="fireside-mcp", daemon=True)
        self._thread.start()

    # --- the sync API ----------------------------------------------------------------------------
    def statuses(self) -> list[ServerStatus]:
        """Every configured server and its state; starts nothing."""
        out = []
        for server in self.config.list():
            with self._lock:
                conn = self._conns.get(server.name)
            if server.disabled:
                out.append(ServerStatus(server, "disabled"))
            elif conn is None:
                out.append(ServerStatus(server, "stopped"))
            else:
                out.append(ServerStatus(server, conn.state, conn.error, conn.tools))
        return out

    def tools(self, name: str) -> list[McpTool]:
        """The tools server ``name`` offers (starting it if needed)."""
        conn = self._connection(name)
        return self._run(conn.list_tools(), self.timeouts.start_s + self.timeouts.list_s)

    def all_tools(self, names: list[str] | None = None) -> tuple[list[McpTool], dict[str, str]]:
        """The tools of every enabled server (or of those in ``names``), and the error of each server
        that could not list them."""
        tools, errors = [], {}
        for server in self.config.list():
            if server.disabled or (names is not None and server.name not in names):
                continue
            try:
                tools += self.tools(server.name)
            except McpServerError as exc:
                errors[server.name] = str(exc)
        return tools, errors

    def call(self, name: str, tool: str, arguments: dict[str, Any] | None = None,
             cancel: threading.Event | None = None) -> ToolResult:
        """Run ``tool`` on server ``name`` and return its result as (untrusted, truncated) text."""
        if arguments is not None and not isinstance(arguments, dict):
            raise McpServerError(f"the arguments for {tool!r} must be a JSON object, not {type(arguments).__name__}")
        conn = self._connection(name)
        return self._run(conn.call(tool, arguments or {}, self.max_result_chars),
                         self.timeouts.start_s + conn.call_timeout, cancel)

    def stop(self, name: str) -> None:
        """Stop one server (it starts again on its next use)."""
        with self._lock:
            conn = self._conns.pop(name, None)
        if conn is not None:
            self._run(conn.shutdown(), 0)

    def close(self) -> None:
        """Stop every server and the loop. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._conns.values())
            self._conns.clear()
        for conn in conns:
            try:
                self._run(conn.shutdown(), 0)
            except McpServerError as exc:
                log.warning("stopping an MCP server failed: %s", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> McpHub:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- plumbing --------------------------------------------------------------------------------
    def _connection(self, name: str) -> Connection:
        server = self.config.get(name)
        if server.disabled:
            raise McpServerError(f"MCP server {name!r} is disabled in {self.config.path}")
        with self._lock:
            if self._closed:
                raise McpServerError("the MCP hub is closed")
            conn = self._conns.get(name)
            if conn is not None and conn.server == server:
                return conn
        token = self.config.token(server)  # outside the lock: the keyring may be slow
        fresh = Connection(server, token, self.settings.cache_dir / "logs" / f"mcp-{name}.log", self.timeouts)
        with self._lock:
            old, self._conns[name] = self._conns.get(name), fresh
        if old is not None:  # the entry changed in mcp.json: the old process must not linger
            self._run(old.shutdown(), 0)
        return fresh

    def _run(self, coro: Coroutine, timeout: float, cancel: threading.Event | None = None) -> Any:
        """Run ``coro`` on the hub's loop and wait for it; the coroutine bounds itself, this is the net."""
        if threading.current_thread() is self._thread:
            raise McpServerError("the MCP hub cannot be called from its own loop")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        deadline = time.monotonic() + timeout + _GRACE_S
        while True:
            try:
                return future.result(timeout=0.1 if cancel else max(0.0, deadline - time.monotonic()))
            except concurrent.futures.TimeoutError:
                if cancel is not None and cancel.is_set():
                    future.cancel()
                    raise McpServerError("the tool call was cancelled") from None
                if time.monotonic() >= deadline:
                    future.cancel()
                    raise McpTimeout(f"the MCP hub gave up waiting after {timeout + _GRACE_S:g} s") from None
            except concurrent.futures.CancelledError:
                raise McpServerError("the MCP request was cancelled") from None
