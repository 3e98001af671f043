"""The Ollama dialect: ``/api/chat``, ``/api/generate`` (NDJSON streams), ``/api/embed``, ``/api/tags``,
``/api/ps``, ``/api/show``, ``/api/version``, and the management routes ``/api/pull`` and
``/api/delete`` (which need the key whenever one is set: the middleware asks for it on every route).

Ollama streams by default (``"stream": true`` unless the client says otherwise), takes its sampling
knobs in ``options`` (``num_predict``, ``temperature``, ``seed``, ``stop``...), its structured output
in ``format`` (``"json"`` or a JSON Schema) and tool-call arguments as objects rather than JSON text.
Run Fireside on Ollama's port (11434) and Ollama-only clients work unchanged. Chat and generate share
their options (``Ask``: sampling, thinking and format read once) and hand the request to
``handler.answer``, with ``keep_alive`` as the model's idle time; the management routes are in
``ollama_admin.py``, and ``options``, typed as Ollama types them, in ``ollama_options.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from .. import __version__ as engine_version
from ..types import ChatRequest, Chunk, CompletionRequest, Sampling, ToolCall
from .context import context
from .errors import ApiError, describe, error_body
from .handler import answer
from .inbound import Refusal, given, image_from_base64, logprobs_option, refuse, sampling
from .ollama_admin import admin_router
from .ollama_options import Options
from .outbound import arguments_dict, logprob_entries, reply_parts, text_logprobs
from .validation import Body, Name, Tool, dumped

router = APIRouter(prefix="/api", tags=["Ollama"])  # routes only; their state comes from app.state
router.include_router(admin_router)
OLLAMA_VERSION = "0.12.0"  # the Ollama API level these routes follow; some clients check it
_DURATION_RE = re.compile(r"^(-?\d{1,12}(?:\.\d{1,9})?)(ms|s|m|h)?$")
FOREVER_S = 10 * 365 * 86400  # a keep_alive past this is "for ever" (and stays a datetime)


class FunctionCall(Body):
    name: Name
    arguments: dict[str, Any] = {}


class ToolCallIn(Body):
    id: str = ""
    function: FunctionCall


class Message(Body):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = ""
    images: list[str] | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_name: str | None = None
    thinking: str | None = None


Format = Literal["json", ""] | dict[str, Any] | None
KeepAlive = str | Annotated[float, Field(allow_inf_nan=False)] | None
TopLogprobs = Annotated[int, Field(ge=0, le=20)]


class Ask(Body):
    """What ``/api/chat`` and ``/api/generate`` share: the model, its options and the reply's form."""

    model: Name
    format: Format = None
    options: Options | None = None
    stream: bool = True
    keep_alive: KeepAlive = None
    think: bool | Literal["low", "medium", "high"] | None = None
    logprobs: bool | None = None
    top_logprobs: TopLogprobs | None = None

    def sampling(self) -> Sampling:
        known = self.options.sampling_fields() if self.options else {}
        if known.get("max_tokens") is not None and known["max_tokens"] <= 0:
            known["max_tokens"] = None  # -1: generate until the model stops (0 too: nothing is no reply)
        return sampling(**known, logprobs=logprobs_option(self.logprobs, self.top_logprobs))

    def chat_request(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> ChatRequest:
        """A chat turn with this body's options and format. ``think`` is the template's ``enable_thinking``:
        false turns thinking off, true or a level (not graded here) asks for it, absent leaves the default."""
        req = ChatRequest(messages=messages, tools=tools, sampling=self.sampling(), reasoning=self.think is not False,
                          enable_thinking=None if self.think is None else self.think is not False,
                          template_param="think")
        if self.format == "json":
            req.json_mode = True
        elif isinstance(self.format, dict):
            req.json_schema = self.format
        elif self.format not in (None, ""):
            raise ApiError(f"format must be \"json\" or a JSON Schema, not {self.format!r}")
        return req


class ChatBody(Ask):
    messages: list[Message] = []
    tools: list[Tool] | None = None


class GenerateBody(Ask):
    prompt: str = ""
    system: str | None = None
    raw: bool = False
    images: list[str] | None = None


class EmbedBody(Body):
    model: Name
    input: str | list[str] = ""
    prompt: str | None = None  # the older /api/embeddings field
    keep_alive: KeepAlive = None
    truncate: bool = True  # Ollama's: an input past the context is cut to fit (False: a 400 instead)


def keep_alive_s(value: str | float | None) -> float | None:
    """Ollama's keep_alive in seconds: None keeps the default, negative (or past ten years) means for
    ever, 0 means unload once the reply is over."""
    if value is None:
        return None
    if isinstance(value, str):
        m = _DURATION_RE.match(value.strip())
        if not m:
            raise ApiError(f"keep_alive {value!r} is not a duration like 5m, 30s or -1", param="keep_alive")
        value = float(m[1]) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600, None: 1}[m[2]]
    return -1.0 if value > FOREVER_S else float(value)


def runtime_ttl(keep_alive: float | None, default: float) -> float:
    """The runtime's ttl for a keep_alive (its ttl 0 means "never unload"). As in Ollama, a request
    without one puts the model back on the server's ``default``."""
    if keep_alive is None or keep_alive == 0:  # 0: the handler unloads the model once the reply is over
        return default
    return 0.0 if keep_alive < 0 else keep_alive


def _with_images(role: str, text: str, images: list[str], where: str) -> list[dict[str, Any]]:
    """Ollama's ``images`` (base64, no data: prefix) as image parts after the message's text, where
    Ollama's own templates put them."""
    if role != "user":
        raise ApiError(f"{where}: images are read in user messages only", param="images")
    parts = [image_from_base64(data, None, f"{where}[{i}]").part() for i, data in enumerate(images)]
    return [*parts, {"type": "text", "text": text}] if text else parts


def engine_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Ollama messages in the engine's (OpenAI) shape: tool-call arguments as JSON text."""
    out = []
    for m in messages:
        msg: dict[str, Any] = {"role": m.role, "content": m.content or ""}
        if m.images:
            msg["content"] = _with_images(m.role, m.content or "", m.images, f"messages[{len(out)}].images")
        if m.tool_calls:
            msg["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.function.name, "arguments": json.dumps(c.function.arguments)}}
                                 for c in m.tool_calls]
        if m.tool_name:
            msg["name"] = m.tool_name
        out.append(msg)
    return out


def timestamp() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def final_fields(done: Chunk) -> dict[str, Any]:
    """The closing fields; ``prompt_eval_count`` counts only the prompt tokens evaluated, as Ollama's do
    (a cached prefix, from a slot or the prompt cache on disk, is left out)."""
    u = done.usage
    if u is None:
        return {"done": True, "done_reason": done.finish_reason or "stop"}
    decode_s = max(u.total_s - u.ttft_s, 0.0)
    return {"done": True, "done_reason": "stop" if done.finish_reason == "tool_calls" else done.finish_reason,
            "total_duration": int(u.total_s * 1e9), "load_duration": 0,
            "prompt_eval_count": u.evaluated_prompt_tokens, "prompt_eval_duration": int(u.ttft_s * 1e9),
            "eval_count": u.completion_tokens, "eval_duration": int(decode_s * 1e9)}


def ollama_calls(calls: list[ToolCall]) -> list[dict]:
    return [{"id": c.id, "function": {"name": c.name, "arguments": arguments_dict(c)}} for c in calls]


class NdjsonEncoder:
    """One JSON object per line, or the whole reply as one: text goes in ``message`` for chat, in
    ``response`` for generate."""

    media_type = "application/x-ndjson"

    def __init__(self, model: str, chat: bool, logprobs: bool = False):
        self.model, self.chat, self.logprobs = model, chat, logprobs

    def fields(self, content: str = "", thinking: str = "", calls: list | None = None, **extra: Any) -> dict:
        head = {"model": self.model, "created_at": timestamp()}
        if not self.chat:
            return {**head, "response": content, **({"thinking": thinking} if thinking else {}), **extra}
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        if calls:
            message["tool_calls"] = ollama_calls(calls)
        return {**head, "message": message, **extra}

    def piece(self, *parts: Any, **fields: Any) -> bytes:
        return (json.dumps(self.fields(*parts, **fields), ensure_ascii=False) + "\n").encode("utf-8")

    def start(self) -> list[bytes]:
        return []

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text":
            extra = {"logprobs": logprob_entries(chunk.logprobs, with_bytes=False)} if self.logprobs else {}
            return [self.piece(chunk.text, done=False, **extra)]
        if chunk.kind == "reasoning":
            return [self.piece(thinking=chunk.text, done=False)]
        if chunk.kind == "tool_calls":  # Ollama sends each call whole, so its deltas are not sent
            return [self.piece(calls=chunk.tool_calls, done=False)]
        if chunk.kind == "done":
            return [self.piece(**final_fields(chunk))]
        return []

    def error(self, exc: BaseException) -> list[bytes]:
        return [(json.dumps(error_body("ollama", describe(exc))) + "\n").encode("utf-8")]

    def end(self) -> list[bytes]:
        return []

    def final(self, chunks: list[Chunk]) -> dict:
        text, thinking, calls, done = reply_parts(chunks)
        extra = {"logprobs": logprob_entries(text_logprobs(chunks), with_bytes=False)} if self.logprobs else {}
        return self.fields(text, thinking, calls, **final_fields(done), **extra)


@router.post("/chat")
async def chat(body: ChatBody, request: Request):
    ttl = keep_alive_s(body.keep_alive)
    req = body.chat_request(engine_messages(body.messages), dumped(body.tools) or None)
    empty = None if body.messages else {"message": {"role": "assistant", "content": ""}}
    return await _reply(request, body, req, ttl, empty, chat=True)


GENERATE_REFUSALS: list[Refusal] = [
    ("suffix", given, "insertion (a suffix after the response) is not supported"),
    ("template", given, "a per-request prompt template is not supported: the model's own template is used"),
    ("context", given, "the deprecated context field is not supported: send the conversation to /api/chat"),
    *[(name, given, "image generation is not supported: the models here write text") for name in
      ("width", "height", "steps")],
]


def generate_request(body: GenerateBody) -> ChatRequest | CompletionRequest:
    refuse(body, GENERATE_REFUSALS)
    if body.raw:
        if body.images:
            raise ApiError("images cannot be combined with raw prompts (the chat template places them)", param="images")
        opts = body.sampling()
        if body.format:
            raise ApiError("format cannot be combined with raw prompts", param="format")
        return CompletionRequest(prompt=body.prompt, sampling=opts)
    messages = ([{"role": "system", "content": body.system}] if body.system else []) + \
               [{"role": "user", "content": _with_images("user", body.prompt, body.images, "images")
                 if body.images else body.prompt}]
    return body.chat_request(messages)


@router.post("/generate")
async def generate(body: GenerateBody, request: Request):
    ttl = keep_alive_s(body.keep_alive)
    req = generate_request(body)  # every field checked before the model is looked up or loaded
    return await _reply(request, body, req, ttl, None if body.prompt else {"response": ""}, chat=False)


async def _reply(request: Request, body: Ask, req: ChatRequest | CompletionRequest, ttl: float | None,
                 empty: dict | None, chat: bool):
    """``req`` answered with ``keep_alive``'s ttl (0: unload the model once the reply is over). A request
    with nothing to answer is Ollama's way to load a model, or to unload it (``empty``: the reply's fields)."""
    ctx = context(request)
    ttl_s = runtime_ttl(ttl, ctx.engine.idle_ttl_s)
    if empty is None:
        return await answer(request, body.model, req, NdjsonEncoder(body.model, chat, bool(body.logprobs)),
                            streamed=body.stream, ttl_s=ttl_s, unload=ttl == 0.0)
    model_id = await ctx.model_for(body.model)
    if ttl == 0.0:
        await run_in_threadpool(ctx.engine.unload, model_id)
    else:
        await run_in_threadpool(lambda: ctx.engine.load(model_id, ttl_s=ttl_s))
        ctx.engine.ttl(model_id, ttl_s)  # a model already loaded takes the new ttl too
    return {"model": body.model, "created_at": timestamp(), **empty, "done": True,
            "done_reason": "unload" if ttl == 0.0 else "load"}


@router.post("/embed")
async def embed(body: EmbedBody, request: Request) -> dict:
    ctx = context(request)
    refuse(body, [("dimensions", given, "a model's embeddings here have the model's own size; leave it out")])
    model_id = await ctx.model_for(body.model)
    inputs = [body.input] if isinstance(body.input, str) else list(body.input)
    if not any(inputs):
        raise ApiError("input must not be empty")
    vectors, n_tokens = await run_in_threadpool(ctx.engine.embed, model_id, inputs, body.truncate)
    return {"model": body.model, "embeddings": vectors, "prompt_eval_count": n_tokens}


@router.post("/embeddings")
async def embeddings(body: EmbedBody, request: Request) -> dict:
    ctx = context(request)
    model_id = await ctx.model_for(body.model)
    vectors, _ = await run_in_threadpool(ctx.engine.embed, model_id, [body.prompt or ""])
    return {"embedding": vectors[0]}


@router.get("/version")
async def version() -> dict:
    return {"version": OLLAMA_VERSION, "fireside": engine_version}


@router.head("/version", include_in_schema=False)
async def version_head() -> Response:
    return Response()
