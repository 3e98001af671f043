"""A fake OpenAI-compatible server with known timing, for measuring the benchmark itself.

It streams one token every ``interval_s`` on a fixed schedule (token i leaves at start + ttft + i *
interval, so scheduling jitter never adds up), answers ``/v1/models``, and can misbehave on purpose:
ignore ``max_tokens`` (send twice as many), stop early (as if at end of sequence), vanish mid-reply
(the connection dropped, as when the machine goes away), leave usage out,
or refuse the ``ignore_eos``/``min_tokens``/``chat_template_kwargs`` extensions with a 400 naming the
first it finds, as OpenAI's own API does.

It also speaks the parts of OpenAI's stream that remote-engine tests need: with ``logprobs`` it
answers a request's ``logprobs``/``top_logprobs`` with ``choices[].logprobs.content`` entries (chat)
or the legacy parallel lists (completions), as OpenAI does (without it, it ignores them, as some
servers do); with ``tool_calls`` N, a chat reply is N function calls streamed as OpenAI streams them
(id and name first, then argument fragments), ending with ``finish_reason: "tool_calls"``.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from fireside.engine.server import ServerThread


@dataclass
class Behaviour:
    interval_s: float = 0.010
    ttft_s: float = 0.020
    ignore_max_tokens: bool = False
    stop_after: int | None = None
    send_usage: bool = True
    refuse_extensions: bool = False
    logprobs: bool = False
    tool_calls: int = 0
    models: tuple[str, ...] = ("fake-model",)  # what /v1/models lists
    vanish_after: int | None = None  # drop the connection after this many tokens, as a machine switched off would


def _event(obj: dict | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def _choice(chat: bool, text: str, finish: str | None, logprobs: dict | None = None) -> dict:
    if chat:
        return {"index": 0, "delta": {"content": text} if text else {}, "logprobs": logprobs, "finish_reason": finish}
    return {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}


def token_logprob(i: int) -> float:
    """The log-probability the fake gives its token ``i``: known, so a test can check it came through."""
    return -0.125 * (i + 1)


def _logprobs(b: Behaviour, body: dict, chat: bool, i: int, text: str) -> dict | None:
    if not b.logprobs or not body.get("logprobs"):
        return None
    top = int(body.get("top_logprobs") or 0) if chat else int(body["logprobs"])
    alternatives = [(f" alt{j}", token_logprob(i) - 1.0 - j) for j in range(top)]
    if not chat:
        return {"tokens": [text], "token_logprobs": [token_logprob(i)], "top_logprobs": [dict(alternatives)],
                "text_offset": [0]}
    entry = {"token": text, "logprob": token_logprob(i), "bytes": list(text.encode()),
             "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives]}
    return {"content": [entry], "refusal": None}


def _call_events(n: int):
    for i in range(n):
        head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": f"tool_{i}", "arguments": ""}}
        yield _event({"object": "chunk", "choices": [{"index": 0, "delta": {"tool_calls": [head]}, "finish_reason": None}]})
        for fragment in ('{"n": ', str(i), "}"):
            part = {"index": i, "function": {"arguments": fragment}}
            yield _event({"object": "chunk", "choices": [{"index": 0, "delta": {"tool_calls": [part]},
                                                          "finish_reason": None}]})


async def _tokens(b: Behaviour, body: dict, chat: bool):
    if chat and b.tool_calls:
        for event in _call_events(b.tool_calls):
            yield event
        yield _event({"object": "chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        yield _event({"object": "chunk", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}})
        yield _event("[DONE]")
        return
    asked = int(body.get("max_tokens") or 16)
    count = asked * 2 if b.ignore_max_tokens else asked
    if b.stop_after is not None:
        count = min(count, b.stop_after)
    start = time.perf_counter() + b.ttft_s
    for i in range(count):
        await asyncio.sleep(max(0.0, start + i * b.interval_s - time.perf_counter()))
        if b.vanish_after is not None and i >= b.vanish_after:
            raise ConnectionAbortedError("the fake server vanished mid-reply")  # uvicorn drops the connection
        text = f" t{i}"
        yield _event({"object": "chunk", "choices": [_choice(chat, text, None, _logprobs(b, body, chat, i, text))]})
    finish = "length" if count >= asked else "stop"
    yield _event({"object": "chunk", "choices": [_choice(chat, "", finish)]})
    if b.send_usage:
        yield _event({"object": "chunk", "choices": [], "usage": {"prompt_tokens": len(str(body).split()),
                                                                  "completion_tokens": count}})
    yield _event("[DONE]")


def fake_app(b: Behaviour) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": m, "object": "model"} for m in b.models]}

    async def answer(request: Request, chat: bool):
        body = await request.json()
        extension = next((k for k in ("ignore_eos", "min_tokens", "chat_template_kwargs") if k in body), None)
        if b.refuse_extensions and extension:
            return JSONResponse({"error": {"message": f"Unrecognized request argument supplied: {extension}"}}, 400)
        return StreamingResponse(_tokens(b, body, chat), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await answer(request, False)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await answer(request, True)

    return app


def start_fake_server(behaviour: Behaviour | None = None, **tls) -> ServerThread:
    """The fake on a loopback port; ``ssl_certfile``/``ssl_keyfile`` make it speak TLS (a paired device's)."""
    thread = ServerThread(fake_app(behaviour or Behaviour()), "127.0.0.1", 0, **tls)
    thread.start()
    return thread
