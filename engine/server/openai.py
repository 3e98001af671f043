"""The OpenAI dialect: ``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``.

A translation layer and nothing more: a request body becomes a ``ChatRequest`` or ``CompletionRequest``
(its sampling fields read once, by ``Generation.sampling``), and ``handler.answer`` runs it; the
encoders here write the runtime's chunks as ``chat.completion.chunk`` (or ``text_completion``) SSE events
ending in ``data: [DONE]``, or as one whole object. A streamed tool call comes as OpenAI streams it: a
first delta with its index, id, type and name, then its arguments in fragments as the model writes them
(``outbound.CallTracker``). A choice that one of ``stop`` ended also says which, as vLLM does
(``stop_reason``: the string; null otherwise), so a Fireside behind another as its remote engine can
tell an Anthropic client the ``stop_sequence``. ``/v1/responses`` lives in ``responses.py``; errors are
shaped by ``errors.py``.
"""

from __future__ import annotations

import base64
import struct
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ..prompts import TEMPLATE_NAMES
from ..types import ChatRequest, Chunk, CompletionRequest, Sampling, ToolCall, Usage
from .context import context, new_id
from .errors import ApiError, describe, error_body
from .handler import answer
from .inbound import (
    Content,
    Effort,
    Refusal,
    ToolChoice,
    apply_format,
    check_tool_choice,
    effort_switch,
    given,
    logprobs_option,
    message_content,
    refuse,
    sampling,
    text_of,
)
from .outbound import CallTracker, logprob_entries, now, reply_parts, sse, text_logprobs
from .validation import Body, Name, Seed, Stop, Tokens, Tool, Unit, dumped

router = APIRouter(prefix="/v1", tags=["OpenAI"])  # routes only; their state comes from app.state


class StreamOptions(Body):
    include_usage: bool = False


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


class JsonSchemaFormat(Body):
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(Body):
    type: Literal["text", "json_object", "json_schema"] = "text"
    json_schema: JsonSchemaFormat | None = None


class Generation(Body):
    """What chat and completions share: the model, streaming, and the sampling fields, read once
    (``sampling``)."""

    model: Name
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: Tokens | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: Unit | None = None
    seed: Seed | None = None
    stop: Stop | None = None
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    ignore_eos: bool | None = None  # llama-server's and vLLM's extension: run to max_tokens (benchmarks send it)

    def sampling(self, max_tokens: int | None, logprobs: int | None) -> Sampling:
        return sampling(max_tokens=max_tokens, temperature=self.temperature, top_p=self.top_p, seed=self.seed,
                        stop=self.stop, frequency_penalty=self.frequency_penalty,
                        presence_penalty=self.presence_penalty, logprobs=logprobs, ignore_eos=self.ignore_eos)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class Prediction(Body):
    """Predicted Outputs: text the reply is expected to largely repeat (a string or text parts)."""

    type: Literal["content"]
    content: Content


class ChatBody(Generation):
    messages: list[Message] = Field(min_length=1)
    max_completion_tokens: Tokens | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice = None
    response_format: ResponseFormat | None = None
    n: int = Field(1, ge=1, le=1)
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    reasoning_effort: Effort | None = None
    chat_template_kwargs: dict[str, Any] | None = None  # vLLM's and llama-server's extension
    prediction: Prediction | None = None


class CompletionBody(Generation):
    prompt: str | list[str]
    max_tokens: Tokens | None = 16
    logprobs: Annotated[int, Field(ge=0, le=5)] | None = None
    echo: bool = False


class EmbeddingBody(Body):
    model: Name
    input: str | list[str]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None


def _many(value: Any) -> bool:
    return value is not None and value != 1


CHAT_REFUSALS: list[Refusal] = [
    ("logit_bias", given, "token biases are not supported (llama.cpp's samplers here take none)"),
    ("audio", given, "audio output is not supported: the models here write text"),
    ("modalities", lambda v: isinstance(v, list) and any(m != "text" for m in v),
     "only the text modality is supported"),
    ("functions", given, "the deprecated functions field is not supported: send tools instead"),
    ("function_call", given, "the deprecated function_call field is not supported: send tool_choice instead"),
    ("web_search_options", given, "web search is not available on this server"),
]
COMPLETION_REFUSALS: list[Refusal] = [
    ("n", _many, "one completion per request (n must be 1)"),
    ("best_of", _many, "one completion per request (best_of must be 1)"),
    ("logit_bias", given, "token biases are not supported (llama.cpp's samplers here take none)"),
    ("suffix", given, "insertion (a suffix after the completion) is not supported"),
]


def chat_request(body: ChatBody) -> ChatRequest:
    refuse(body, CHAT_REFUSALS)
    tools = dumped(body.tools) or None
    thinking, variables = template_settings(body)
    req = ChatRequest(messages=[dict(dumped(m), content=message_content(m.role, dumped(m.content), f"messages[{i}]"))
                                for i, m in enumerate(body.messages)], tools=tools,
                      tool_choice=check_tool_choice(tools, dumped(body.tool_choice)),
                      sampling=body.sampling(body.max_completion_tokens or body.max_tokens,
                                             logprobs_option(body.logprobs, body.top_logprobs)),
                      enable_thinking=thinking, template_vars=variables,
                      template_param="chat_template_kwargs" if body.chat_template_kwargs else "reasoning_effort",
                      prediction=text_of(dumped(body.prediction.content)) or None if body.prediction else None)
    apply_format(req, dumped(body.response_format))
    return req


def template_settings(body: ChatBody) -> tuple[bool | None, dict[str, Any]]:
    """The thinking switch and the other chat-template variables: ``reasoning_effort`` as the switch and
    (other than ``none``) as the variable gpt-oss's template reads; ``chat_template_kwargs`` as
    variables, as vLLM and llama-server pass them (its ``enable_thinking``, a boolean, wins over
    ``reasoning_effort``). The renderer's own names are refused."""
    thinking = effort_switch(body.reasoning_effort)
    kwargs = dict(body.chat_template_kwargs or {})
    clash = sorted(TEMPLATE_NAMES & set(kwargs))
    if clash:
        raise ApiError(f"chat_template_kwargs cannot set {clash[0]}: the server gives the template that itself",
                       param=f"chat_template_kwargs.{clash[0]}")
    if "enable_thinking" in kwargs:
        thinking = kwargs.pop("enable_thinking")
        if not isinstance(thinking, bool):
            raise ApiError("chat_template_kwargs.enable_thinking must be true or false",
                           param="chat_template_kwargs.enable_thinking")
    if body.reasoning_effort not in (None, "none"):
        kwargs.setdefault("reasoning_effort", body.reasoning_effort)
    return thinking, kwargs


@router.get("/models")
async def list_models(request: Request) -> dict:
    models = await run_in_threadpool(context(request).models)
    return {"object": "list", "data": [model_card(m) for m in models]}


@router.get("/models/{name:path}")
async def get_model(name: str, request: Request) -> dict:
    return model_card(await run_in_threadpool(context(request).entry, name))


def model_card(model: Any) -> dict:
    return {"id": model.id, "object": "model", "created": int(model.added_at or 0), "owned_by": model.source}


@router.post("/chat/completions")
async def chat_completions(body: ChatBody, request: Request):
    req = chat_request(body)  # every field checked before the model is looked up or loaded
    return await answer(request, body.model, req, ChatEncoder(body.model, body.include_usage, bool(body.logprobs)),
                        streamed=body.stream, call_limit=1 if body.parallel_tool_calls is False else None)


class ChatEncoder:
    """``chat.completion.chunk`` events for one streamed reply, or the whole ``chat.completion``."""

    media_type = "text/event-stream"
    objects = ("chat.completion.chunk", "chat.completion")  # streamed, whole
    fingerprint = {"system_fingerprint": "fireside"}

    def __init__(self, model: str, include_usage: bool, logprobs: bool = False):
        self.id, self.model, self.include_usage, self.created = new_id("chatcmpl-"), model, include_usage, now()
        self.calls, self.logprobs = CallTracker(), logprobs
        self.stop_reason: str | None = None  # the stop string that ended the reply, once it has ended

    def _head(self, whole: bool) -> dict[str, Any]:
        return {"id": self.id, "object": self.objects[whole], "created": self.created, "model": self.model,
                **self.fingerprint}

    def _choice(self, delta: dict) -> dict[str, Any]:
        return {"delta": delta}

    def _event(self, delta: dict | None, finish: str | None = None, logprobs: Any = None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, **self._choice(delta), "logprobs": logprobs,
                                             "finish_reason": finish, **self._stop_reason(finish)}]
        return sse({**self._head(False), "choices": choices, **extra})

    def _stop_reason(self, finish: str | None) -> dict:
        return {"stop_reason": self.stop_reason} if finish else {}

    def start(self) -> list[bytes]:
        return [self._event({"role": "assistant", "content": ""})]

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text":
            logprobs = {"content": logprob_entries(chunk.logprobs), "refusal": None} if self.logprobs else None
            return [self._event({"content": chunk.text}, logprobs=logprobs)]
        if chunk.kind == "reasoning":
            return [self._event({"reasoning_content": chunk.text})]
        if chunk.kind in ("tool_call_delta", "tool_calls"):
            return [self._event({"tool_calls": [tool_call_delta(*u)]}) for u in self.calls.updates(chunk)]
        self.stop_reason = chunk.stop_sequence
        out = [self._event({}, finish_reason(chunk.finish_reason))]
        if self.include_usage:
            out.append(self._event(None, usage=openai_usage(chunk.usage), timings=llama_timings(chunk.usage)))
        return out

    def error(self, exc: BaseException) -> list[bytes]:
        return [sse(error_body("openai", describe(exc)))]

    def end(self) -> list[bytes]:
        return [sse("[DONE]")]

    def final(self, chunks: list[Chunk]) -> dict:
        text, reasoning, calls, done = reply_parts(chunks)
        message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
        logprobs = {"content": logprob_entries(text_logprobs(chunks)), "refusal": None} if self.logprobs else None
        return self._whole({"message": message, "logprobs": logprobs}, done)

    def _whole(self, choice: dict[str, Any], done: Chunk) -> dict:
        return {**self._head(True), "choices": [{"index": 0, **choice, "finish_reason": finish_reason(done.finish_reason),
                                                 "stop_reason": done.stop_sequence}],
                "usage": openai_usage(done.usage), "timings": llama_timings(done.usage)}


def llama_timings(usage: Usage | None) -> dict:
    """llama-server's ``timings`` (its keys, where Fireside has the figure), which tools made for it read:
    prompt tokens taken from the cache and evaluated, speeds, and speculative decoding's drafts."""
    u = usage or Usage()
    return {"cache_n": u.cached_tokens, "prompt_n": u.prompt_tokens - u.cached_tokens,
            "prompt_per_second": u.prompt_tokens_per_s, "predicted_n": u.completion_tokens,
            "predicted_per_second": u.decode_tokens_per_s, "draft_n": u.draft_tokens,
            "draft_n_accepted": u.accepted_draft_tokens}


def openai_usage(usage: Usage | None) -> dict:
    u = usage or Usage()
    return {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": u.reasoning_tokens,
                                          "accepted_prediction_tokens": u.accepted_prediction_tokens,
                                          "rejected_prediction_tokens": u.rejected_prediction_tokens}}


def finish_reason(reason: str | None) -> str:
    """The engine's finish reason in OpenAI's words (a cancelled reply simply stopped)."""
    return reason if reason in ("stop", "length", "tool_calls") else "stop"


def tool_call_delta(index: int, head: ToolCall | None, fragment: str) -> dict:
    """One entry of a streamed ``tool_calls`` delta: the id, type and name come once, first."""
    if head is None:
        return {"index": index, "function": {"arguments": fragment}}
    return {"index": index, "id": head.id, "type": "function", "function": {"name": head.name, "arguments": fragment}}


@router.post("/completions")
async def completions(body: CompletionBody, request: Request):
    prompt = body.prompt if isinstance(body.prompt, str) else "".join(body.prompt[:1])
    if isinstance(body.prompt, list) and len(body.prompt) > 1:
        raise ApiError("one prompt per request", param="prompt")
    refuse(body, COMPLETION_REFUSALS)
    if body.echo and body.logprobs is not None:
        raise ApiError("echo with logprobs would need the prompt's log-probabilities, which are not computed",
                       param="echo")
    req = CompletionRequest(prompt=prompt, sampling=body.sampling(body.max_tokens, body.logprobs))
    encoder = CompletionEncoder(body.model, body.include_usage, logprobs=body.logprobs is not None,
                                offset=len(prompt), echo=prompt if body.echo else "")
    return await answer(request, body.model, req, encoder, streamed=body.stream)


def completion_logprobs(entries: list, offset: int) -> dict:
    """The legacy completions shape: parallel lists, ``text_offset`` counted from the prompt's start."""
    offsets, at = [], offset
    for e in entries:
        offsets.append(at)
        at += len(e.token)
    return {"tokens": [e.token for e in entries], "token_logprobs": [e.logprob for e in entries],
            "top_logprobs": [dict(e.top) for e in entries], "text_offset": offsets}


class CompletionEncoder(ChatEncoder):
    """``text_completion`` events for one streamed raw completion, or the whole ``text_completion``."""

    objects, fingerprint = ("text_completion", "text_completion"), {}

    def __init__(self, model: str, include_usage: bool, logprobs: bool = False, offset: int = 0, echo: str = ""):
        super().__init__(model, include_usage, logprobs)
        self.offset, self.echo = offset, echo

    def _choice(self, delta: dict) -> dict[str, Any]:
        return {"text": delta.get("content", "")}

    def start(self) -> list[bytes]:
        return [self._event({"content": self.echo})] if self.echo else []

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text" and self.logprobs:
            logprobs = completion_logprobs(chunk.logprobs or [], self.offset)
            self.offset += sum(len(e.token) for e in chunk.logprobs or [])
            return [self._event({"content": chunk.text}, logprobs=logprobs)]
        return super().chunk(chunk)

    def final(self, chunks: list[Chunk]) -> dict:
        text, _, _, done = reply_parts(chunks)
        logprobs = completion_logprobs(text_logprobs(chunks), self.offset) if self.logprobs else None
        return {**self._whole({"text": self.echo + text, "logprobs": logprobs}, done), "id": new_id("cmpl-")}


@router.post("/embeddings")
async def embeddings(body: EmbeddingBody, request: Request) -> dict:
    ctx = context(request)
    inputs = [body.input] if isinstance(body.input, str) else body.input
    if not inputs:
        raise ApiError("input must not be empty", param="input")
    if body.dimensions is not None:
        raise ApiError("dimensions: a model's embeddings here have the model's own size; leave it out",
                       param="dimensions")
    model_id = await ctx.model_for(body.model)
    vectors, n_tokens = await run_in_threadpool(ctx.engine.embed, model_id, inputs)
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, body.encoding_format)}
            for i, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": body.model,
            "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}}


def encode_vector(vector: list[float], fmt: str) -> list[float] | str:
    if fmt == "base64":  # little-endian float32, as OpenAI sends it
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
    return vector
