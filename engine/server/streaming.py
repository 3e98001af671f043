"""From the runtime's blocking chunk generators to the event loop, and from there to the socket.

``ChunkPump`` runs one generator (``rt.chat``, ``rt.complete``) on its own thread, never on the event
loop, and hands its chunks over through an ``asyncio.Queue``; several chunks that arrived together
are taken in one batch and written in one send. Its ``cancel`` event goes to the runtime, which
stops within one token once it is set. ``stream`` wraps a dialect's encoder in a response that sets
that event when the client goes away (Starlette cancels the body iterator on ``http.disconnect``), so
an abandoned stream frees its place in the model's queue at once. A reply the runtime reports as
cancelled although nobody here cancelled it was cut by an unload: that becomes a ``ReplyCut`` error,
so no client mistakes a cut reply for a finished one. ``collect`` serves the non-streamed
replies, with a watcher that cancels generation if the client hangs up while waiting. The chat
routes reach both through ``handler.answer``; ``/api/pull`` uses them for its progress.

A stream waits for its first chunks before it answers, so an error there is a proper status. An
encoder with ``keepalive`` (Anthropic's) does not wait longer than ``EARLY_S``: a long prompt can take
minutes to evaluate, and an agent that hears nothing for that long gives up and sends it again. Its
stream starts (``message_start``) and then carries a keep-alive event every ``PING_S`` until the
first token; an error after that goes in the stream, as any later one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Protocol

from starlette.requests import Request
from starlette.responses import StreamingResponse

from ..errors import ReplyCut
from ..types import Chunk
from .errors import ApiError

_END = object()
_WAITING = object()  # no chunk yet, and the stream has started without one
EARLY_S = 3.0  # how long a stream whose encoder can keep alive waits for its first chunk before it starts
PING_S = 10.0  # then, a keep-alive event this often until the first chunk comes
ChunkSource = Callable[[threading.Event], Iterator[Chunk]]


class ChunkPump:
    """One generation running on a worker thread; chunks and the final error come out on the loop."""

    def __init__(self, source: ChunkSource, name: str = "fireside-server-stream"):
        self.cancel = threading.Event()
        self._source = source
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue = asyncio.Queue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for chunk in self._source(self.cancel):
                if isinstance(chunk, Chunk) and chunk.kind == "done" and chunk.finish_reason == "cancelled" \
                        and not self.cancel.is_set():
                    raise ReplyCut("the reply was cut short: its model was unloaded (or its runner stopped) "
                                   "while it was generating")
                self._put(chunk)
        except BaseException as exc:  # handed to the loop, which raises it in the handler
            self._put(exc)
        finally:
            self._put(_END)

    def _put(self, item: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: the server is shutting down
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)

    async def batch(self, timeout: float | None = None) -> list[Chunk] | None:
        """The next chunks available (at least one), or None once the generator has ended;
        ``TimeoutError`` if none came within ``timeout`` seconds."""
        items = [await asyncio.wait_for(self._queue.get(), timeout)]
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        chunks: list[Chunk] = []
        for item in items:
            if item is _END:
                if chunks:
                    self._queue.put_nowait(_END)  # hand out what came first; end on the next call
                    return chunks
                return None
            if isinstance(item, BaseException):
                if chunks:
                    self._queue.put_nowait(item)
                    return chunks
                raise item
            chunks.append(item)
        return chunks

    async def first(self, request: Request, timeout: float | None = None) -> list[Chunk] | object | None:
        """Wait for the first chunks (raising the generator's error, so it becomes a proper status)
        while watching for the client to hang up; ``_WAITING`` if none came within ``timeout``."""
        async with watch_disconnect(request, self.cancel):
            try:
                return await self.batch(timeout)
            except TimeoutError:
                return _WAITING


@contextlib.asynccontextmanager
async def watch_disconnect(request: Request, cancel: threading.Event) -> AsyncIterator[None]:
    """Set ``cancel`` if the client disconnects while the body of the ``with`` runs."""

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                cancel.set()
                return

    task = asyncio.create_task(watch())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class Encoder(Protocol):
    """A dialect's wire format for one streamed reply."""

    def start(self) -> list[bytes]: ...
    def chunk(self, chunk: Chunk) -> list[bytes]: ...
    def error(self, exc: BaseException) -> list[bytes]: ...
    def end(self) -> list[bytes]: ...


class KeepAlive(Protocol):
    """An encoder that can start its stream before the first chunk and keep a client listening."""

    def keepalive(self) -> list[bytes]: ...


class CancellingStream(StreamingResponse):
    """A streamed response that cancels its generation however the response ends."""

    def __init__(self, content: AsyncIterator[bytes], cancel: threading.Event, media_type: str):
        super().__init__(content, media_type=media_type,
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.cancel = cancel

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.cancel.set()


async def stream(request: Request, source: ChunkSource, encoder: Encoder, media_type: str) -> CancellingStream:
    """Start generating, wait for the first chunks (errors before them become HTTP errors), then stream.
    An encoder with ``keepalive`` waits ``EARLY_S`` at most, then keeps the client listening."""
    pump = ChunkPump(source)
    keepalive = getattr(encoder, "keepalive", None)
    first = await pump.first(request, EARLY_S if keepalive is not None else None)

    async def body() -> AsyncIterator[bytes]:
        try:
            out = encoder.start()
            chunks = first
            while chunks is not None:
                for chunk in [] if chunks is _WAITING else chunks:
                    out.extend(encoder.chunk(chunk))
                yield b"".join(out)
                out = []
                try:
                    chunks = await pump.batch(PING_S if chunks is _WAITING else None)
                except TimeoutError:  # still no first chunk: tell the client the reply is coming
                    out, chunks = keepalive(), _WAITING
                except Exception as exc:  # after the headers: the error goes in the stream
                    out.extend(encoder.error(exc))
                    break
            out.extend(encoder.end())
            yield b"".join(out)
        finally:
            pump.cancel.set()

    return CancellingStream(body(), pump.cancel, media_type)


async def collect(request: Request, source: ChunkSource) -> list[Chunk]:
    """Every chunk of a reply, for a non-streamed answer."""
    pump = ChunkPump(source)
    chunks: list[Chunk] = []
    async with watch_disconnect(request, pump.cancel):
        while (batch := await pump.batch()) is not None:
            chunks.extend(batch)
    if pump.cancel.is_set():
        raise ApiError("the client went away", 499)
    return chunks

