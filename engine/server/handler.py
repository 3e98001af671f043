"""The one chat handler every dialect shares: a request in the engine's terms in, a reply in the dialect's out.

A dialect module translates its body into a ``ChatRequest`` or ``CompletionRequest`` (every field checked
first) and builds its ``ReplyEncoder``; ``answer`` does the rest, the same for all of them: resolve the
client's model name (``ServerContext.model_for``, which loads it on first use), queue the request on
the engine, stream its chunks through the encoder or collect them into the encoder's whole body, and
turn a reply an unload cut into a ``ReplyCut`` error and a client that hung up into a cancel
(``streaming.py``). The few things one dialect adds are options: ``call_limit`` (OpenAI's
``parallel_tool_calls``, Anthropic's ``disable_parallel_tool_use``, Responses' ``max_tool_calls``),
``ttl_s`` and ``unload`` (Ollama's ``keep_alive``) and ``prepare``, which runs on a worker thread once
the model is known (Responses' ``truncation: "auto"``, Anthropic's prompt count for ``message_start``).
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
from .streaming import Encoder, collect, stream

Prepare = Callable[[ServerContext, str, ChatRequest], ChatRequest]  # (context, model id, request) -> request


class ReplyEncoder(Encoder, Protocol):
    """A dialect's wire format for one reply: streamed (``Encoder``) or whole (``final``)."""

    media_type: str

    def final(self, chunks: list[Chunk]) -> Any: ...


async def answer(request: Request, model: str, req: ChatRequest | CompletionRequest, encoder: ReplyEncoder, *,
                 streamed: bool, call_limit: int | None = None, ttl_s: float | None = None, unload: bool = False,
                 prepare: Prepare | None = None) -> Any:
    """The reply to ``req`` for the model a client calls ``model``, streamed or whole, in ``encoder``'s
    format. ``call_limit``: tool calls the reply keeps (None: all); ``ttl_s``: the model's idle time
    from now (None: as it was); ``unload``: unload the model once the reply is over."""
    ctx = context(request)
    model_id = await ctx.model_for(model)
    if prepare is not None:
        req = await run_in_threadpool(prepare, ctx, model_id, req)
    run = ctx.engine.complete if isinstance(req, CompletionRequest) else ctx.engine.chat

    def source(cancel: threading.Event) -> Iterator[Chunk]:
        try:
            chunks = run(model_id, req, cancel=cancel, ttl_s=ttl_s)
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
