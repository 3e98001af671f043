"""A fake OpenAI-compatible server with known timing, for measuring the benchmark itself.

It streams one token every ``interval_s`` on a fixed schedule (token i leaves at start + ttft + i *
interval, so scheduling jitter never adds up), answers ``/v1/models``, and can misbehave on purpose:
ignore ``max_tokens`` (send twice as many), stop early (as if at end of sequence), leave usage out,
or refuse the ``ignore_eos``/``min_tokens`` extensions with a 400 as strict servers do.
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


def _event(obj: dict | str) -> bytes:
    return f"data: {obj if isinstance(obj, str) else json.dumps(obj)}\n\n".encode()


def _choice(chat: bool, text: str, finish: str | None) -> dict:
    if chat:
        return {"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}
    return {"index": 0, "text": text, "finish_reason": finish}


async def _tokens(b: Behaviour, body: dict, chat: bool):
    asked = int(body.get("max_tokens") or 16)
    count = asked * 2 if b.ignore_max_tokens else asked
    if b.stop_after is not None:
        count = min(count, b.stop_after)
    start = time.perf_counter() + b.ttft_s
    for i in range(count):
        await asyncio.sleep(max(0.0, start + i * b.interval_s - time.perf_counter()))
        yield _event({"object": "chunk", "choices": [_choice(chat, f" t{i}", None)]})
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
        return {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}

    async def answer(request: Request, chat: bool):
        body = await request.json()
        if b.refuse_extensions and ("ignore_eos" in body or "min_tokens" in body):
            return JSONResponse({"error": {"message": "Unrecognized request argument: ignore_eos"}}, 400)
        return StreamingResponse(_tokens(b, body, chat), media_type="text/event-stream")

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await answer(request, False)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        return await answer(request, True)

    return app


def start_fake_server(behaviour: Behaviour | None = None) -> ServerThread:
    thread = ServerThread(fake_app(behaviour or Behaviour()), "127.0.0.1", 0)
    thread.start()
    return thread
