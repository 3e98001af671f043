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

    async def batch(self) -> list[Chunk] | None:
        """The next chunks available (at least one), or None once the generator has ended."""
        items = [await self._queue.get()]
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

    async def first(self, request: Request) -> list[Chunk] | None:
        """Wait for the first chunks (raising the generator's error, so it becomes a proper status)
        while watching for the client to hang up."""
        async with watch_disconnect(request, self.cancel):
            return await self.batch()


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
    """Start generating, wait for the first chunks (errors before them become HTTP errors), then stream."""
    pump = ChunkPump(source)
    first = await pump.first(request)

    async def body() -> AsyncIterator[bytes]:
        try:
            out = encoder.start()
            chunks = first
            while chunks is not None:
                for chunk in chunks:
                    out.extend(encoder.chunk(chunk))
                yield b"".join(out)
                out = []
                try:
                    chunks = await pump.batch()
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

