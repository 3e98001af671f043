"""The one chat handler every dialect shares: a request in the engine's terms in, the dialect's reply out.

A dialect module checks its body, translates it into a ``ChatRequest`` or ``CompletionRequest`` and
builds its ``ReplyEncoder``; ``answer`` does the rest once for all of them: resolve the model name
(``ServerContext.model_for``), queue the request on the engine, and stream the chunks through the
encoder or collect them into its whole reply (``streaming.py``: a reply an unload cut is an error, a
client that hangs up cancels). What one dialect adds is an option: a cap on tool calls, Ollama's
keep-alive, or ``prepare`` on a worker thread once the model is known (truncation, a prompt count).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..types import ChatRequest, Chunk, CompletionRequest
from .context import ServerContext, context
from .imagebudget import decoded
from .streaming import Encoder, collect, stream

TICKET = "fireside.ticket"  # the scope key of a generation request's ticket among the arrivals
GENERATION_PATHS = frozenset({"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
                              "/api/chat", "/api/generate"})  # the routes that reach a runner


class ArrivalsMiddleware:
    """ASGI middleware, outermost: a generation request takes a ticket among the engine's arrivals
    (``runtime/arrivals.py``) as soon as its headers are read, so a runner knows it is coming; the
    runtime hands it in as it sends the request on, and the response's end does for one that never
    got there."""

    def __init__(self, app: Callable, engine: Any):
        self.app, self.engine = app, engine

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] not in GENERATION_PATHS:
            return await self.app(scope, receive, send)
        ticket = self.engine.arrivals.enter()
        try:
            await self.app({**scope, TICKET: ticket}, receive, send)
        finally:
            ticket.hand_in()


class ReplyEncoder(Encoder, Protocol):
    """A dialect's wire format for one reply: streamed (``Encoder``) or whole (``final``)."""

    media_type: str

    def final(self, chunks: list[Chunk]) -> Any: ...


async def answer(request: Request, model: str, req: ChatRequest | CompletionRequest, encoder: ReplyEncoder, *,
                 streamed: bool, call_limit: int | None = None, ttl_s: float | None = None, unload: bool = False,
                 prepare: Callable[[ServerContext, str, ChatRequest], ChatRequest] | None = None) -> Any:
    """The reply to ``req`` for the model a client calls ``model``, streamed or whole, in ``encoder``'s
    format. ``call_limit``: tool calls the reply keeps (None: all); ``ttl_s``: the model's idle time
    from now (None: as it was); ``unload``: unload the model once the reply is over."""
    ctx = context(request)
    if isinstance(req, ChatRequest):
        req = await decoded(ctx.policy, req)  # images fetched, weighed, then decoded on a worker thread
    model_id = await ctx.model_for(model)
    if prepare is not None:
        req = await run_in_threadpool(prepare, ctx, model_id, req)
    run = ctx.engine.complete if isinstance(req, CompletionRequest) else ctx.engine.chat

    def source(cancel: threading.Event) -> Iterator[Chunk]:
        try:
            chunks = run(model_id, req, cancel=cancel, ttl_s=ttl_s, arrival=request.scope.get(TICKET))
            yield from chunks if call_limit is None else at_most_calls(chunks, call_limit)
        finally:
            if unload:
                ctx.engine.unload(model_id)

    if streamed:
        return await stream(request, source, encoder, encoder.media_type)
    return encoder.final(await collect(request, source))


def at_most_calls(chunks: Iterator[Chunk], limit: int) -> Iterator[Chunk]:
    """A reply that keeps its first ``limit`` tool calls and drops any others."""
    for chunk in chunks:
        if chunk.kind == "tool_call_delta" and chunk.index >= limit:
            continue
        if chunk.kind == "tool_calls":
            chunk = replace(chunk, tool_calls=(chunk.tool_calls or [])[:limit])
        yield chunk
