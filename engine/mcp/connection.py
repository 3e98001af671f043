"""One MCP server's connection: its transport (a stdio process or Streamable HTTP) and SDK session,
living on the hub's event loop (``toolhub.py``), started on demand and stopped when it misbehaves.

Every await is bounded: a server that does not start, list or answer in time raises ``McpTimeout`` and
is stopped (a hung server is restarted on its next use rather than trusted again); one that crashes
mid-call or answers with something malformed raises ``McpServerError`` naming what went wrong, with
the last lines it wrote to stderr (kept in ``logs/mcp-NAME.log`` in the cache folder).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import McpServerError, McpTimeout
from .config import McpServer
from .results import McpTool, ToolResult, result_from, tools_from

log = logging.getLogger(__name__)
_STOP_S = 6.0  # the SDK gives a stdio server 2 s to leave on its own, then terminates and kills it


@dataclass(frozen=True)
class Timeouts:
    start_s: float = 30.0
    list_s: float = 15.0
    call_s: float = 120.0


def describe(exc: BaseException) -> str:
    """The innermost message of ``exc``, through the exception groups anyio wraps errors in."""
    while getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class Connection:
    """One server's session, owned by the hub's loop: started on demand, stopped on failure or close."""

    def __init__(self, server: McpServer, token: str | None, log_path: Path, timeouts: Timeouts):
        self.server, self.token, self.log_path = server, token, log_path
        self.timeouts = timeouts
        self.session: Any = None
        self.task: asyncio.Task | None = None
        self.stop: asyncio.Event | None = None
        self.state, self.error = "stopped", ""
        self.tools: list[McpTool] | None = None
        self._start_lock: asyncio.Lock | None = None
        self._log_offset = 0

    @property
    def call_timeout(self) -> float:
        return self.server.timeout_s or self.timeouts.call_s

    async def ensure(self) -> Any:
        """The live session, starting the server first if it is not running."""
        self._start_lock = self._start_lock or asyncio.Lock()
        async with self._start_lock:
            if self.session is not None and self.task is not None and not self.task.done():
                return self.session
            await self._start()
            return self.session

    async def _start(self) -> None:
        ready = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.state, self.error, self.tools = "starting", "", None
        self.task = asyncio.create_task(self._hold(ready), name=f"mcp-{self.server.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.timeouts.start_s)
        except asyncio.TimeoutError:
            await self.shutdown()
            raise McpTimeout(self.fail(f"did not start within {self.timeouts.start_s:g} s")) from None
        except Exception as exc:
            await self.shutdown()
            raise McpServerError(self.fail(f"could not start: {describe(exc)}")) from None
        self.state = "running"
        log.info("MCP server %s is running (%s)", self.server.name, self.server.describe())

    async def _hold(self, ready: asyncio.Future) -> None:
        """Open the transport and session, and keep them open until ``stop`` is set (one task, as anyio
        needs a context entered and left in the same task)."""
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await self._transport(stack)
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await session.initialize()
                self.session = session
                ready.set_result(None)
                await self.stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc) if isinstance(exc, Exception) else ready.cancel()
            elif not isinstance(exc, asyncio.CancelledError):
                log.warning("MCP server %s stopped: %s", self.server.name, describe(exc))
                self.fail(f"stopped: {describe(exc)}")
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.session = None

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple:
        if self.server.url:
            import httpx
            from mcp.client.streamable_http import streamable_http_client

            headers = dict(self.server.headers)
            if self.token:
                headers["Authorization"] = f"Bearer {self.token}"
            timeout = httpx.Timeout(self.timeouts.start_s, read=self.call_timeout + 5)
            # redirects stay off, as the SDK's own client has them: the SDK follows same-origin ones itself
            client = await stack.enter_async_context(httpx.AsyncClient(headers=headers, timeout=timeout))
            return await stack.enter_async_context(streamable_http_client(self.server.url, http_client=client))
        from mcp.client.stdio import StdioServerParameters, stdio_client

        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        errlog = stack.enter_context(open(self.log_path, "a", encoding="utf-8", errors="replace"))
        self._log_offset = errlog.tell()
        params = StdioServerParameters(command=self.server.command, args=self.server.args,
                                       env=self.server.env or None)
        return await stack.enter_async_context(stdio_client(params, errlog=errlog))

    def fail(self, what: str) -> str:
        """Mark the server failed and return the message for the user, with its last stderr lines."""
        self.state, self.error = "failed", f"MCP server {self.server.name!r} {what}"
        tail = self._stderr_tail()
        if tail:
            self.error += f"; its last output: {tail}"
        return self.error

    def _stderr_tail(self, lines: int = 3) -> str:
        if self.server.url:
            return ""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                f.seek(self._log_offset)
                text = f.read()[-4000:]
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])[:600]

    async def shutdown(self) -> None:
        task, self.task = self.task, None
        if self.stop is not None:
            self.stop.set()
        if task is not None and not task.done():
            if self.session is None:  # stuck before the handshake ended: nothing waits for ``stop`` yet
                task.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(task), _STOP_S)
            except BaseException:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, _STOP_S)
        if self.state in ("running", "starting"):
            self.state = "stopped"

    async def list_tools(self) -> list[McpTool]:
        session = await self.ensure()
        result = await self._bounded(session.list_tools(), self.timeouts.list_s, "listing its tools")
        self.tools = tools_from(self.server.name, result)
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any], max_chars: int) -> ToolResult:
        session = await self.ensure()
        result = await self._bounded(session.call_tool(tool, arguments), self.call_timeout, f"calling {tool!r}")
        try:
            return result_from(self.server.name, tool, result, max_chars)
        except McpServerError as exc:
            raise McpServerError(self.fail(str(exc).removeprefix(f"MCP server {self.server.name!r} "))) from None

    async def _bounded(self, coro: Coroutine, timeout: float, doing: str) -> Any:
        """Await ``coro`` within ``timeout``; a timeout or a broken connection stops the server."""
        from mcp.shared.exceptions import McpError

        try:
            return await asyncio.wait_for(coro, timeout)
        except asyncio.TimeoutError:
            await self.shutdown()
            raise McpTimeout(self.fail(f"did not answer within {timeout:g} s while {doing}; it was stopped "
                                       "and will be restarted on next use")) from None
        except McpError as exc:
            if self.task is not None and self.task.done() or "Connection closed" in str(exc):
                await self.shutdown()
                raise McpServerError(self.fail(f"failed while {doing}: {describe(exc)}")) from None
            raise McpServerError(f"MCP server {self.server.name!r} refused {doing}: {describe(exc)}") from None
        except Exception as exc:
            await self.shutdown()
            what = "answered with a malformed reply" if type(exc).__name__ == "ValidationError" else "failed"
            raise McpServerError(self.fail(f"{what} while {doing} ({describe(exc)})")) from None
