"""The tunnel: llama.cpp's RPC bytes between two machines, inside the shared listener's TLS.

llama.cpp's RPC protocol has no authentication and no encryption. On the lending machine its server
listens on loopback only (``worker.py``); the one way in is a WebSocket on the shared TLS listener,
``RPC_PATH``, which the listener's policy lets through only with a paired device's token (checked
before the handshake is accepted, and again every ``RECHECK_S``: a revoked device's tunnel closes
within a second). On the main machine, ``Tunnel`` listens on loopback for the runner's RPC client and
carries each connection to the device over TLS that trusts only the certificate pinned at pairing.
Bytes pass unchanged in both directions; nothing on either side parses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .worker import START_TIMEOUT_S

log = logging.getLogger(__name__)
RPC_PATH = "/fireside/rpc"
LEND_PATH = "/fireside/lend"
RECHECK_S = 0.25
CHUNK = 1 << 20
OPEN_WITHIN_S = START_TIMEOUT_S + 5  # how long the runner's connection waits for its tunnel to open


def _nodelay(sock: socket.socket | None) -> None:
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def serve_tunnel(receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]],
                       still_paired: Callable[[], bool], worker_port: Callable[[], int]) -> None:
    """One paired device's tunnel on the shared listener (an ASGI websocket, its token already checked):
    accepted once the worker answers on loopback, then bytes both ways until either side closes, the
    device is revoked, or sharing stops."""
    first = await receive()
    if first.get("type") != "websocket.connect":
        return
    try:
        port = await asyncio.get_running_loop().run_in_executor(None, worker_port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except Exception as exc:  # no worker: refused in words the client logs
        log.error("a paired device's RPC tunnel was refused: %s", exc)
        await send({"type": "websocket.close", "code": 1011, "reason": "this device lends no memory now"[:120]})
        return
    await send({"type": "websocket.accept"})  # (asyncio and uvloop set TCP_NODELAY on their transports)

    async def up() -> None:  # device -> worker
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            data = msg.get("bytes") or (msg.get("text") or "").encode()
            writer.write(data)
            await writer.drain()

    async def down() -> None:  # worker -> device
        while data := await reader.read(CHUNK):
            await send({"type": "websocket.send", "bytes": data})

    async def watch() -> None:
        while await asyncio.get_running_loop().run_in_executor(None, still_paired):
            await asyncio.sleep(RECHECK_S)
        log.warning("a revoked device's RPC tunnel was closed")

    tasks = [asyncio.ensure_future(t()) for t in (up, down, watch)]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()
        writer.close()
        with contextlib.suppress(Exception):
            await send({"type": "websocket.close", "code": 1000})


class Tunnel:
    """On the main machine: a loopback port (``endpoint``) whose every connection is carried to the
    paired device at ``address`` (host:port of its shared listener) as a WebSocket over pinned TLS with
    the device's token. ``close`` ends the listener and every connection (the runner's RPC client then
    sees its device go away)."""

    def __init__(self, address: str, cert_pem: str, token: str, name: str = ""):
        from ..devices import pinned_context

        self.name, self.address, self._token = name, address, token
        self._ctx = pinned_context(cert_pem)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._links: set[Any] = set()
        self._lock = threading.Lock()
        self.closed = threading.Event()
        threading.Thread(target=self._accept, name=f"fireside-tunnel-{name}", daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._carry, args=(conn,), name=f"fireside-tunnel-{self.name}-link",
                             daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        _nodelay(conn)
        ws = self._open()
        if ws is None:
            conn.close()  # the runner's RPC client sees its device go away, and says so
            return
        with ws:  # (websockets wants its connections used as context managers)
            with self._lock:
                self._links.update((conn, ws))

            def down() -> None:  # device -> runner (recv, not iteration: iterating a connection may reconnect)
                try:
                    while True:
                        data = ws.recv()
                        conn.sendall(data if isinstance(data, bytes) else data.encode())
                except Exception:  # closed, either way
                    pass
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

            reader = threading.Thread(target=down, daemon=True)
            reader.start()
            try:
                while data := conn.recv(CHUNK):  # runner -> device
                    ws.send(data)
            except Exception:
                pass
            finally:
                ws.close()
                conn.close()
                reader.join(timeout=2)
                with self._lock:
                    self._links.difference_update((conn, ws))

    def _open(self):
        """A WebSocket to the device's tunnel, or None when none opened within ``OPEN_WITHIN_S``. Nothing
        has crossed yet (the runner's first bytes wait in its socket), so a failed try is tried again: a
        busy device may be slow to answer or to start its worker, and a runner whose connection is reset
        at its first message dies (llama.cpp aborts) and loses its whole load."""
        from websockets.sync.client import connect

        host, _, port = self.address.rpartition(":")
        deadline, pause = time.monotonic() + OPEN_WITHIN_S, 0.25
        while True:
            raw = None
            try:
                raw = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
                _nodelay(raw)  # before the handshake: RPC's small request-reply messages must not wait on Nagle
                raw.settimeout(None)
                return connect(f"wss://{host if ':' not in host else f'[{host}]'}:{port}{RPC_PATH}", sock=raw,
                               ssl=self._ctx, server_hostname="fireside",
                               additional_headers={"Authorization": f"Bearer {self._token}"},
                               compression=None, max_size=None, close_timeout=1,
                               # the device answers the handshake once its worker listens: started first,
                               # after a crash, or again after a kill, that may take it up to START_TIMEOUT_S
                               open_timeout=max(1.0, deadline - time.monotonic()))
            except Exception as exc:
                if raw is not None:
                    raw.close()
                left = deadline - time.monotonic()
                if self.closed.is_set() or left <= pause:
                    log.error("the RPC tunnel to %s could not open: %s", self.name or self.address, exc)
                    return None
                log.warning("the RPC tunnel to %s did not open (%s); trying again", self.name or self.address, exc)
                time.sleep(pause)
                pause = min(pause * 2, 2.0)

    def close(self) -> None:
        self.closed.set()
        self._listener.close()
        with self._lock:
            links = list(self._links)
        for link in links:
            with contextlib.suppress(Exception):
                if isinstance(link, socket.socket):
                    link.shutdown(socket.SHUT_RDWR)
                link.close()
