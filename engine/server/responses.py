"""OpenAI's Responses API: ``POST /v1/responses``, whole or streamed, continued with ``previous_response_id``.

A response's input (a string, or message and ``function_call_output`` items) becomes engine chat
messages; the reply becomes ``message`` and ``function_call`` output items (streamed: each call's
arguments as ``response.function_call_arguments.delta`` events while the model writes them). Each finished response's
conversation is kept in the context's ``ResponseStore`` (the last few hundred, in memory), so a
request naming ``previous_response_id`` continues it without resending the history. The previous
response's ``instructions`` are not carried over, as in OpenAI's API.

``parallel_tool_calls: false`` and ``max_tool_calls`` cap the function calls a reply keeps;
``truncation: "auto"`` drops the oldest conversation items (never the instructions or other system
messages) until the prompt fits the model's context, measured with its own tokenizer (``"disabled"``,
the default, answers a prompt that does not fit with a 400, as OpenAI does); ``include`` with
``message.output_text.logprobs`` (and ``top_logprobs``) puts the runtime's log-probabilities on each
``output_text`` part and text delta.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from ..remote import is_remote
from ..types import ChatRequest, Chunk, TokenLogprob, ToolCall, Usage
from .context import ResponseStore, context, new_id
from .errors import ApiError, describe, error_body
from .mapping import (
    CallTracker,
    Refusal,
    at_most_calls,
    check_tool_choice,
    given,
    logprob_entries,
    now,
    refuse,
    sampling,
    sse,
    text_of,
)
from .openai import Content, ContentPart, ToolChoice, apply_format
from .streaming import collect, reply_parts, stream
from .validation import Body, Name, Tokens, Unit, dumped

router = APIRouter(prefix="/v1", tags=["OpenAI"])  # routes only; state comes from app.state
LOGPROBS = "message.output_text.logprobs"  # the one ``include`` value that changes what is generated here
ROOM = 256  # the reply's room truncation "auto" leaves when max_output_tokens does not say


class InputItem(Body):
    type: Literal["message", "function_call", "function_call_output"] = "message"
    role: Literal["user", "assistant", "system", "developer"] = "user"
    content: Content = None
    call_id: str = ""
    name: Name | None = None
    arguments: str = "{}"
    output: str | list[ContentPart] = ""


class ResponsesTool(Body):
    type: Name
    name: Name | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class FlatChoice(Body):
    type: Literal["function"] = "function"
    name: Name


class TextFormat(Body):
    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")


class TextOptions(Body):
    format: TextFormat | None = None


class ResponsesBody(Body):
    model: Name
    input: str | list[InputItem]
    instructions: str | None = None
    previous_response_id: str | None = None
    max_output_tokens: Tokens | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: Unit | None = None
    stream: bool = False
    store: bool = True
    tools: list[ResponsesTool] | None = None
    tool_choice: ToolChoice | FlatChoice = None
    text: TextOptions | None = None
    parallel_tool_calls: bool = True
    max_tool_calls: Annotated[int, Field(ge=0)] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None

    @property
    def logprobs(self) -> bool:
        return LOGPROBS in (self.include or [])

    @property
    def call_limit(self) -> int | None:
        """How many function calls a reply may keep (None: any)."""
        limits = [n for n in (self.max_tool_calls, None if self.parallel_tool_calls else 1) if n is not None]
        return min(limits) if limits else None


REFUSALS: list[Refusal] = [
    ("background", given, "background responses are not supported: stream, or wait for the reply"),
    ("conversation", given, "the Conversations API is not served here: continue with previous_response_id"),
    ("prompt", given, "stored prompt templates are not served here: send instructions and input"),
]


def input_messages(items: str | list[InputItem]) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for item in items:
        if item.type == "message":
            role = "system" if item.role == "developer" else item.role
            out.append({"role": role, "content": text_of(dumped(item.content))})
        elif item.type == "function_call":
            if item.name is None:
                raise ApiError("input: a function_call item needs a name", param="input")
            call = {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.arguments}}
            out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        else:
            out.append({"role": "tool", "tool_call_id": item.call_id, "content": text_of(dumped(item.output))})
    return out


def conversation(body: ResponsesBody, store: ResponseStore) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    if body.previous_response_id:
        found = store.get(body.previous_response_id)
        if found is None:
            raise ApiError(f"no response with id {body.previous_response_id!r} (responses are kept in memory "
                           f"while the server runs)", 404, "response_not_found", "previous_response_id")
        history = [m for m in found if m["role"] != "system"]
    system = [{"role": "system", "content": body.instructions}] if body.instructions else []
    return system + history + input_messages(body.input)


def chat_request(body: ResponsesBody, messages: list[dict[str, Any]]) -> ChatRequest:
    tools = []
    refuse(body, REFUSALS)
    if body.top_logprobs is not None and not body.logprobs:
        raise ApiError(f'top_logprobs needs include: ["{LOGPROBS}"]', param="top_logprobs")
    for t in body.tools or []:
        if t.type != "function":  # hosted tools run on OpenAI's side: a model here could not use one
            raise ApiError(f"tools: hosted tools ({t.type}) are not available on this server; send function tools",
                           param="tools")
        if t.name is None:
            raise ApiError("tools: a function tool needs a name", param="tools")
        tools.append({"type": "function", "function": {k: v for k, v in dumped(t).items() if k != "type"}})
    choice = check_tool_choice(tools, dumped(body.tool_choice))
    if body.call_limit == 0 and tools:
        if choice != "auto" and choice != "none":
            raise ApiError("max_tool_calls is 0, but tool_choice demands a call", param="max_tool_calls")
        choice = "none"  # no call may be kept: the model answers in text
    req = ChatRequest(messages=messages, tools=tools or None, tool_choice=choice,
                      sampling=sampling(max_tokens=body.max_output_tokens, temperature=body.temperature,
                                        top_p=body.top_p, logprobs=(body.top_logprobs or 0) if body.logprobs else None))
    fmt = dumped(body.text.format) if body.text and body.text.format else None
    if fmt and fmt.get("type") == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {"schema": fmt.get("schema")}}
    apply_format(req, fmt)
    return req


def truncated(ctx: Any, model_id: str, req: ChatRequest, body: ResponsesBody) -> ChatRequest:
    """``truncation: "auto"``: ``req`` without as few of its oldest non-system messages as it takes for
    the prompt, counted by the model's own tokenizer and template, to leave the reply its room in one
    slot's context (``max_output_tokens``, else ``ROOM``, at most half the context). The last message
    always stays: if it alone does not fit, the runner refuses the prompt as too long, as "disabled" does.
    Runs on a worker thread (it loads the model and tokenizes)."""
    if is_remote(model_id):
        raise ApiError('truncation: "auto" needs the prompt measured by the model\'s tokenizer, which is not '
                       'known here for a remote model; send "disabled"', param="truncation")
    n_ctx = ctx.engine.load(model_id).n_ctx
    limit = n_ctx - min(body.max_output_tokens or ROOM, n_ctx // 2)
    dropped = [i for i, m in enumerate(req.messages) if m["role"] != "system"][:-1]  # oldest first

    def without(k: int) -> ChatRequest:
        gone = set(dropped[:k])
        kept = [m for i, m in enumerate(req.messages) if i not in gone]
        while len(kept) > 1 and kept[0]["role"] == "tool":  # a result whose call was dropped means nothing
            kept = kept[1:]
        return replace(req, messages=kept)

    def fits(k: int) -> bool:
        return ctx.engine.count_chat_tokens(model_id, without(k)) <= limit

    lo, hi = 0, len(dropped)  # the fewest items to drop: fits(hi) is assumed, the runner has the last word
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    return without(lo)


def output_items(text: str, calls: list[ToolCall], logprobs: list[TokenLogprob] | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if text or not calls:
        items.append({"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                      "content": [output_text(text, logprobs)]})
    items += [{"type": "function_call", "id": new_id("fc_"), "call_id": c.id, "name": c.name,
               "arguments": c.arguments, "status": "completed"} for c in calls]
    return items


def output_text(text: str, logprobs: list[TokenLogprob] | None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs is not None:
        part["logprobs"] = logprob_entries(logprobs)
    return part


def response_object(rid: str, body: ResponsesBody, output: list, usage: Usage | None, status: str) -> dict:
    u = usage or Usage()
    return {"id": rid, "object": "response", "created_at": now(), "status": status, "model": body.model,
            "output": output, "instructions": body.instructions, "previous_response_id": body.previous_response_id,
            "tools": dumped(body.tools) or [], "tool_choice": dumped(body.tool_choice) or "auto", "parallel_tool_calls": body.parallel_tool_calls,
            "max_tool_calls": body.max_tool_calls, "truncation": body.truncation or "disabled",
            "top_logprobs": body.top_logprobs,
            "temperature": body.temperature, "top_p": body.top_p, "metadata": {}, "error": None,
            "incomplete_details": None if status != "incomplete" else {"reason": "max_output_tokens"},
            "usage": {"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens,
                      "total_tokens": u.prompt_tokens + u.completion_tokens,
                      "input_tokens_details": {"cached_tokens": u.cached_tokens},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def remember(store: ResponseStore, body: ResponsesBody, rid: str, messages: list, text: str, calls: list) -> None:
    if not body.store:
        return
    reply: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        reply["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                               for c in calls]
    store.put(rid, [*messages, reply])


@router.post("/responses")
async def create_response(body: ResponsesBody, request: Request):
    ctx = context(request)
    messages = conversation(body, ctx.responses)
    req = chat_request(body, messages)  # every field checked before the model is looked up or loaded
    model_id = await run_in_threadpool(ctx.ready, body.model)
    if body.truncation == "auto":
        req = await run_in_threadpool(truncated, ctx, model_id, req, body)

    def source(cancel):
        chunks = ctx.engine.chat(model_id, req, cancel=cancel)
        return chunks if body.call_limit is None else at_most_calls(chunks, body.call_limit)

    rid = new_id("resp_")
    if body.stream:
        return await stream(request, source, ResponseEncoder(rid, body, messages, ctx.responses), "text/event-stream")
    chunks = await collect(request, source)
    text, _, calls, done = reply_parts(chunks)
    remember(ctx.responses, body, rid, messages, text, calls)
    status = "incomplete" if done.finish_reason == "length" else "completed"
    logprobs = [e for c in chunks if c.kind == "text" for e in c.logprobs or []] if body.logprobs else None
    return response_object(rid, body, output_items(text, calls, logprobs), done.usage, status)


class ResponseEncoder:
    """The Responses API's streaming events: the text as one message item's deltas, each function call
    as its own item whose arguments stream as ``response.function_call_arguments.delta`` events."""

    def __init__(self, rid: str, body: ResponsesBody, messages: list, store: ResponseStore):
        self.rid, self.body, self.messages, self.store = rid, body, messages, store
        self.seq, self.text, self.calls, self.msg_id = 0, "", [], new_id("msg_")
        self.tracker, self.call_items = CallTracker(), {}  # call index -> (output index, item)
        self.logprobs: list[TokenLogprob] | None = [] if body.logprobs else None

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        return sse({"type": kind, "sequence_number": self.seq, **data}, kind)

    def start(self) -> list[bytes]:
        created = response_object(self.rid, self.body, [], None, "in_progress")
        return [self._event("response.created", response=created),
                self._event("response.in_progress", response=created)]

    def _open_message(self) -> list[bytes]:
        item = {"type": "message", "id": self.msg_id, "status": "in_progress", "role": "assistant", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return [self._event("response.output_item.added", output_index=0, item=item),
                self._event("response.content_part.added", item_id=self.msg_id, output_index=0,
                            content_index=0, part=part)]

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text" and not self.call_items:  # text after a call is not sent (it is not an item)
            out = self._open_message() if not self.text else []
            self.text += chunk.text
            if self.logprobs is not None:
                self.logprobs += chunk.logprobs or []
            entries = logprob_entries(chunk.logprobs, with_bytes=False) if self.logprobs is not None else []
            return out + [self._event("response.output_text.delta", item_id=self.msg_id, output_index=0,
                                      content_index=0, delta=chunk.text, logprobs=entries)]
        if chunk.kind in ("tool_call_delta", "tool_calls"):
            if chunk.kind == "tool_calls":
                self.calls += chunk.tool_calls or []
            return [b for update in self.tracker.updates(chunk) for b in self._call_update(*update)]
        if chunk.kind == "done":
            return self._finish(chunk)
        return []

    def _call_update(self, index: int, head: ToolCall | None, fragment: str) -> list[bytes]:
        out = []
        if head is not None:
            item = {"type": "function_call", "id": new_id("fc_"), "call_id": head.id, "name": head.name,
                    "arguments": "", "status": "in_progress"}
            self.call_items[index] = ((1 if self.text else 0) + len(self.call_items), item)
            out.append(self._event("response.output_item.added", output_index=self.call_items[index][0],
                                   item=dict(item)))
        at, item = self.call_items[index]
        if fragment:
            item["arguments"] += fragment
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=at,
                                   delta=fragment))
        return out

    def _finish(self, done: Chunk) -> list[bytes]:
        out, items = [], []
        if self.text or not self.call_items:
            message = {"type": "message", "id": self.msg_id, "status": "completed", "role": "assistant",
                       "content": [output_text(self.text, self.logprobs)]}
            if self.text:
                done_logprobs = logprob_entries(self.logprobs, with_bytes=False) if self.logprobs is not None else []
                out += [self._event("response.output_text.done", item_id=self.msg_id, output_index=0,
                                    content_index=0, text=self.text, logprobs=done_logprobs),
                        self._event("response.content_part.done", item_id=self.msg_id, output_index=0,
                                    content_index=0, part=message["content"][0])]
            out.append(self._event("response.output_item.done", output_index=0, item=message))
            items.append(message)
        for index, (at, item) in sorted(self.call_items.items()):
            if index < len(self.calls):
                item["arguments"] = self.calls[index].arguments
            item["status"] = "completed"
            out += [self._event("response.function_call_arguments.done", item_id=item["id"], output_index=at,
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=at, item=item)]
            items.append(item)
        remember(self.store, self.body, self.rid, self.messages, self.text, self.calls)
        status = "incomplete" if done.finish_reason == "length" else "completed"
        final = response_object(self.rid, self.body, items, done.usage, status)
        return out + [self._event(f"response.{status}", response=final)]

    def error(self, exc: BaseException) -> list[bytes]:
        return [self._event("error", **error_body("openai", describe(exc))["error"])]

    def end(self) -> list[bytes]:
        return []
