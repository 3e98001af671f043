"""The OpenAI dialect: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``.

A thin translation layer: each request body becomes a ``ChatRequest`` or ``CompletionRequest``, the
runtime's chunks become ``chat.completion`` objects or ``chat.completion.chunk`` SSE events ending
in ``data: [DONE]``. Tool calls arrive from the runtime whole, so a streamed call is one
``tool_calls`` delta carrying its id, name and complete arguments. ``/v1/responses`` lives in
``responses.py``; errors are shaped by ``errors.py``.
"""

from __future__ import annotations

import base64
import struct
from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ..runtime.types import ChatRequest, Chunk, CompletionRequest
from .context import context, new_id
from .errors import ApiError, describe, error_body
from .mapping import (
    check_tool_choice,
    finish_reason,
    now,
    openai_tool_calls,
    openai_usage,
    sampling,
    sse,
    text_of,
)
from .streaming import collect, reply_parts, stream
from .validation import Body, Name, Seed, Stop, Tokens, Tool, Unit, dumped

router = APIRouter(prefix="/v1", tags=["OpenAI"])  # routes only; their state comes from app.state


class StreamOptions(Body):
    include_usage: bool = False


class ContentPart(Body):
    type: Name
    text: str | None = None


Content = str | list[ContentPart | str] | None


class FunctionCall(Body):
    name: Name
    arguments: str = "{}"  # JSON text, as OpenAI sends it


class ToolCallIn(Body):
    id: str = ""
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(Body):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Content = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None


class NamedFunction(Body):
    name: Name


class NamedChoice(Body):
    type: Literal["function"] = "function"
    function: NamedFunction


ToolChoice = Literal["auto", "none", "required"] | NamedChoice | None


class JsonSchemaFormat(Body):
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(Body):
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: JsonSchemaFormat | None = None


class ChatBody(Body):
    model: Name
    messages: list[Message] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Tokens | None = None
    max_completion_tokens: Tokens | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: Unit | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    tools: list[Tool] | None = None
    tool_choice: ToolChoice = None
    response_format: ResponseFormat | None = None
    n: int = Field(1, ge=1, le=1)


class CompletionBody(Body):
    model: Name
    prompt: str | list[str]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Tokens | None = 16
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: Unit | None = None
    seed: Seed | None = None
    stop: Stop | None = None


class EmbeddingBody(Body):
    model: Name
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"


def engine_message(m: Message) -> dict[str, Any]:
    return dict(dumped(m), content=text_of(dumped(m.content)))


def chat_request(body: ChatBody) -> ChatRequest:
    tools = dumped(body.tools) or None
    req = ChatRequest(messages=[engine_message(m) for m in body.messages], tools=tools,
                      tool_choice=check_tool_choice(tools, dumped(body.tool_choice)),
                      sampling=sampling(max_tokens=body.max_completion_tokens or body.max_tokens,
                                        temperature=body.temperature, top_p=body.top_p, seed=body.seed,
                                        stop=body.stop, frequency_penalty=body.frequency_penalty,
                                        presence_penalty=body.presence_penalty))
    apply_format(req, dumped(body.response_format))
    return req


def apply_format(req: ChatRequest, fmt: dict[str, Any] | None) -> None:
    kind = (fmt or {}).get("type", "text")
    if kind == "json_object":
        req.json_mode = True
    elif kind == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise ApiError("response_format.json_schema.schema must be a JSON Schema object",
                           param="response_format")
        req.json_schema = schema
    elif kind != "text":
        raise ApiError(f"response_format type {kind!r} is not supported", param="response_format")


@router.get("/models")
async def list_models(request: Request) -> dict:
    models = await run_in_threadpool(context(request).models)
    return {"object": "list", "data": [model_card(m) for m in models]}


@router.get("/models/{name:path}")
async def get_model(name: str, request: Request) -> dict:
    ctx = context(request)
    model_id = await run_in_threadpool(ctx.resolve, name)
    models = await run_in_threadpool(ctx.models)
    return model_card(next(m for m in models if m.id == model_id))


def model_card(model: Any) -> dict:
    return {"id": model.id, "object": "model", "created": int(model.added_at or 0), "owned_by": model.source}


@router.post("/chat/completions")
async def chat_completions(body: ChatBody, request: Request):
    ctx = context(request)
    req = chat_request(body)  # every field checked before the model is looked up or loaded
    model_id = await run_in_threadpool(ctx.ready, body.model)

    def source(cancel):
        return ctx.runtime.chat(model_id, req, cancel=cancel)

    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return await stream(request, source, ChatEncoder(body.model, usage), "text/event-stream")
    return chat_completion(body.model, await collect(request, source))


def chat_completion(model: str, chunks: list[Chunk]) -> dict:
    text, reasoning, calls, done = reply_parts(chunks)
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = openai_tool_calls(calls)
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": now(), "model": model,
            "system_fingerprint": "fireside",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": finish_reason(done.finish_reason)}],
            "usage": openai_usage(done.usage)}


class ChatEncoder:
    """``chat.completion.chunk`` events for one streamed reply."""

    def __init__(self, model: str, include_usage: bool):
        self.id, self.model, self.include_usage, self.created = new_id("chatcmpl-"), model, include_usage, now()
        self.n_calls = 0

    def _event(self, delta: dict | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        return sse({"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                    "model": self.model, "system_fingerprint": "fireside", "choices": choices, **extra})

    def start(self) -> list[bytes]:
        return [self._event({"role": "assistant", "content": ""})]

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text":
            return [self._event({"content": chunk.text})]
        if chunk.kind == "reasoning":
            return [self._event({"reasoning_content": chunk.text})]
        if chunk.kind == "tool_calls":
            calls = openai_tool_calls(chunk.tool_calls or [])
            for call in calls:
                call["index"], self.n_calls = self.n_calls, self.n_calls + 1
            return [self._event({"tool_calls": calls})]
        out = [self._event({}, finish_reason(chunk.finish_reason))]
        if self.include_usage:
            out.append(self._event(None, usage=openai_usage(chunk.usage)))
        return out

    def error(self, exc: BaseException) -> list[bytes]:
        return [sse(error_body("openai", describe(exc)))]

    def end(self) -> list[bytes]:
        return [sse("[DONE]")]


@router.post("/completions")
async def completions(body: CompletionBody, request: Request):
    ctx = context(request)
    prompt = body.prompt if isinstance(body.prompt, str) else "".join(body.prompt[:1])
    if isinstance(body.prompt, list) and len(body.prompt) > 1:
        raise ApiError("one prompt per request", param="prompt")
    req = CompletionRequest(prompt=prompt, sampling=sampling(max_tokens=body.max_tokens, temperature=body.temperature,
                                                             top_p=body.top_p, seed=body.seed, stop=body.stop))
    model_id = await run_in_threadpool(ctx.ready, body.model)

    def source(cancel):
        return ctx.runtime.complete(model_id, req, cancel=cancel)

    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return await stream(request, source, CompletionEncoder(body.model, usage), "text/event-stream")
    text, _, _, done = reply_parts(await collect(request, source))
    return {"id": new_id("cmpl-"), "object": "text_completion", "created": now(), "model": body.model,
            "choices": [{"index": 0, "text": text, "logprobs": None,
                         "finish_reason": finish_reason(done.finish_reason)}],
            "usage": openai_usage(done.usage)}


class CompletionEncoder(ChatEncoder):
    def _event(self, delta: dict | None, finish: str | None = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "text": (delta or {}).get("content", ""),
                                             "logprobs": None, "finish_reason": finish}]
        return sse({"id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                    "choices": choices, **extra})

    def start(self) -> list[bytes]:
        return []


@router.post("/embeddings")
async def embeddings(body: EmbeddingBody, request: Request) -> dict:
    ctx = context(request)
    inputs = [body.input] if isinstance(body.input, str) else body.input
    if not inputs:
        raise ApiError("input must not be empty", param="input")
    model_id = await run_in_threadpool(ctx.ready, body.model)
    vectors, n_tokens = await run_in_threadpool(ctx.runtime.embed, model_id, inputs)
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
            for i, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": body.model,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}


def encode_vector(vector: list[float], fmt: str) -> list[float] | str:
    if fmt == "base64":  # little-endian float32, as OpenAI sends it
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector
