"""OpenAI's Responses API: ``POST /v1/responses``, whole or streamed, continued with ``previous_response_id``.

A response's input (a string, or message and ``function_call_output`` items; ``reasoning`` items are
left out of the prompt) becomes engine chat messages; the reply becomes output items: a thinking
model's ``reasoning`` first (streamed as ``response.reasoning_text.delta`` events), then the
``message``, then ``function_call`` items (streamed: each call's arguments as
``response.function_call_arguments.delta`` events while the model writes them). ``reasoning.effort``
``"none"`` turns a template's thinking off, any other level asks for it. Each finished response's
conversation is kept in the context's ``ResponseStore`` (the last few hundred, 64 MiB at most, in memory), so a
request naming ``previous_response_id`` continues it without resending the history. The previous
response's ``instructions`` are not carried over, as in OpenAI's API.

Tools: ``function`` tools are offered to the model, and so are the functions a ``namespace`` tool
groups (Codex sends its sub-agent tools as one): the model sees each by its own name (``ns.name``
where two would clash), and a call it makes comes back as a ``function_call`` item with the
function's ``name`` and its ``namespace``, as OpenAI returns it. Hosted tools this server cannot run
(``web_search``, ``code_interpreter``...) are left out of what the model sees, as a client that sends
them on every request expects; a ``tool_choice`` that forces one is a 400 naming it.
``max_output_tokens`` is echoed in the response object.

``parallel_tool_calls: false`` and ``max_tool_calls`` cap the function calls a reply keeps;
``truncation: "auto"`` drops the oldest conversation items (never the instructions or other system
messages) until the prompt fits the model's context, measured with its own tokenizer (``"disabled"``,
the default, answers a prompt that does not fit with a 400, as OpenAI does); ``include`` with
``message.output_text.logprobs`` (and ``top_logprobs``) puts the runtime's log-probabilities on each
``output_text`` part and text delta. A ``file_search`` tool is run here, before the reply
(``file_search.py``): its ``file_search_call`` item comes first in the output, and the message's ``[n]``
markers become ``file_citation`` annotations (the encoder cuts them out as the text streams). ``handler.answer`` runs the request, as for every dialect; the
parts shared with chat completions (content, tool choice, ``response_format``) come from ``inbound.py``.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

from fastapi import APIRouter, Request

from ..documents import CitationCutter
from ..errors import ContextOverflow
from ..types import ChatRequest, Chunk, TokenLogprob, ToolCall, Usage
from .context import ResponseStore, context, new_id
from .errors import ApiError, describe, error_body
from .file_search import FileSearch, run_search, search_tool
from .handler import answer
from .inbound import (
    Refusal,
    apply_format,
    check_tool_choice,
    effort_switch,
    given,
    message_content,
    refuse,
    sampling,
    text_of,
)
from .outbound import CallTracker, logprob_entries, now, sse
from .response_body import (
    LOGPROBS,
    ROOM,
    FlatChoice,
    HostedChoice,
    InputItem,
    ResponsesBody,
    ToolNames,
)
from .validation import dumped

router = APIRouter(prefix="/v1", tags=["OpenAI"])  # routes only; state comes from app.state

REFUSALS: list[Refusal] = [
    ("background", given, "background responses are not supported: stream, or wait for the reply"),
    ("conversation", given, "the Conversations API is not served here: continue with previous_response_id"),
    ("prompt", given, "stored prompt templates are not served here: send instructions and input"),
]


def input_messages(items: str | list[InputItem], names: ToolNames | None = None) -> list[dict[str, Any]]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    out: list[dict[str, Any]] = []
    for item in items:
        if item.type == "message":
            role = "system" if item.role == "developer" else item.role
            out.append({"role": role, "content": message_content(role, dumped(item.content), f"input[{len(out)}]")})
        elif item.type == "reasoning":  # an earlier turn's thinking: left out of the prompt, as templates do
            continue
        elif item.type == "function_call":
            if item.name is None:
                raise ApiError("input: a function_call item needs a name", param="input")
            name = names.for_model(item.namespace, item.name) if names else item.name
            call = {"id": item.call_id, "type": "function", "function": {"name": name, "arguments": item.arguments}}
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
    return system + history + input_messages(body.input, ToolNames(body.tools))


def chat_request(body: ResponsesBody, messages: list[dict[str, Any]]) -> ChatRequest:
    tools = []
    refuse(body, REFUSALS)
    if body.top_logprobs is not None and not body.logprobs:
        raise ApiError(f'top_logprobs needs include: ["{LOGPROBS}"]', param="top_logprobs")
    # hosted tools other than file_search (run before the reply, file_search.py) run on OpenAI's side:
    # left out, since a model here could not use one (tool_choice that forces one is refused below)
    names = ToolNames(body.tools)
    for seen, t in names.functions:
        fields = {k: v for k, v in dumped(t).items() if k not in ("type", "tools")}
        tools.append({"type": "function", "function": {**fields, "name": seen}})
    choice = dumped(body.tool_choice)
    if isinstance(body.tool_choice, FlatChoice):  # a namespace's function, named as the client knows it
        namespace = (body.tool_choice.model_extra or {}).get("namespace")
        choice = {"type": "function", "name": names.for_model(namespace if isinstance(namespace, str) else None,
                                                               body.tool_choice.name)}
    hosted = body.tool_choice.type if isinstance(body.tool_choice, HostedChoice) else None
    if hosted not in (None, "file_search"):
        raise ApiError(f"tool_choice forces the hosted tool {hosted}, which this server cannot run (only "
                       "function tools and file_search)", param="tool_choice")
    if search_tool(body.tools) is not None and (hosted or (choice == "required" and not tools)):
        choice = "auto"  # the file search runs before the reply whatever the choice; it is the tool "required"
    elif hosted:
        raise ApiError("tool_choice names file_search, but no file_search tool was given", param="tool_choice")
    choice = check_tool_choice(tools, choice)
    if body.call_limit == 0 and tools:
        if choice != "auto" and choice != "none":
            raise ApiError("max_tool_calls is 0, but tool_choice demands a call", param="max_tool_calls")
        choice = "none"  # no call may be kept: the model answers in text
    req = ChatRequest(messages=messages, tools=tools or None, tool_choice=choice,
                      sampling=sampling(max_tokens=body.max_output_tokens, temperature=body.temperature,
                                        top_p=body.top_p, logprobs=(body.top_logprobs or 0) if body.logprobs else None),
                      enable_thinking=effort_switch(body.reasoning.effort if body.reasoning else None),
                      template_param="reasoning.effort")
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
    if ctx.engine.is_remote(model_id):
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
        try:  # a prompt past the size cap is refused before it is tokenized (protocol.py, runner/tokens.py)
            return ctx.engine.count_chat_tokens(model_id, without(k)) <= limit
        except ContextOverflow:
            return False

    lo, hi = 0, len(dropped)  # the fewest items to drop: fits(hi) is assumed, the runner has the last word
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid + 1, hi)
    return without(lo)


def output_text(text: str, logprobs: list[TokenLogprob] | None, annotations: list | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": annotations or []}
    if logprobs is not None:
        part["logprobs"] = logprob_entries(logprobs)
    return part


def response_object(rid: str, body: ResponsesBody, output: list, usage: Usage | None, status: str) -> dict:
    u = usage or Usage()
    return {"id": rid, "object": "response", "created_at": now(), "status": status, "model": body.model,
            "output": output, "instructions": body.instructions, "previous_response_id": body.previous_response_id,
            "tools": dumped(body.tools) or [], "tool_choice": dumped(body.tool_choice) or "auto", "parallel_tool_calls": body.parallel_tool_calls,
            "max_tool_calls": body.max_tool_calls, "truncation": body.truncation or "disabled",
            "top_logprobs": body.top_logprobs, "reasoning": dumped(body.reasoning),
            "temperature": body.temperature, "top_p": body.top_p, "max_output_tokens": body.max_output_tokens,
            "metadata": {}, "error": None,
            "incomplete_details": None if status != "incomplete" else {"reason": "max_output_tokens"},
            "usage": {"input_tokens": u.prompt_tokens, "output_tokens": u.completion_tokens,
                      "total_tokens": u.prompt_tokens + u.completion_tokens,
                      # nothing is written to a cache on request here (the slot's KV reuse is automatic)
                      "input_tokens_details": {"cached_tokens": u.cached_tokens, "cache_write_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens}}}


def remember(store: ResponseStore, body: ResponsesBody, rid: str, messages: list, text: str, calls: list) -> None:
    """Keep the conversation for ``previous_response_id``: the reply's text and calls, not its reasoning
    (left out of later prompts, as a ``reasoning`` input item is)."""
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
    chat_request(body, messages)  # every field checked before a store is searched or the model loaded
    tool, search, prompt = search_tool(body.tools), None, messages
    if tool is not None and body.tool_choice != "none":
        search, prompt = await run_search(request, tool, messages, body.include, body.model)
    req = chat_request(body, prompt)
    encoder = ResponseEncoder(new_id("resp_"), body, messages, ctx.responses, search)
    return await answer(request, body.model, req, encoder, streamed=body.stream, call_limit=body.call_limit,
                        prepare=partial(truncated, body=body) if body.truncation == "auto" else None)


class _Part:
    """The reasoning or message output item being streamed, at ``index`` in the output."""

    def __init__(self, kind: str, index: int, logprobs: bool):
        self.kind, self.index, self.text = kind, index, ""
        self.annotations: list[dict[str, Any]] = []  # file_citation annotations, set as the message closes
        self.id = new_id("rs_" if kind == "reasoning" else "msg_")
        self.logprobs: list[TokenLogprob] | None = [] if logprobs and kind == "message" else None

    def item(self, status: str, text: str | None = None) -> dict[str, Any]:
        """The item with its content so far (``text`` None) or with no content yet (``text`` "")."""
        if self.kind == "reasoning":
            content = [] if text == "" else [{"type": "reasoning_text", "text": self.text}]
            return {"type": "reasoning", "id": self.id, "summary": [], "content": content, "status": status}
        content = [] if text == "" else [output_text(self.text, self.logprobs, self.annotations)]
        return {"type": "message", "id": self.id, "status": status, "role": "assistant", "content": content}

    def empty_part(self) -> dict[str, Any]:
        if self.kind == "reasoning":
            return {"type": "reasoning_text", "text": ""}
        return {"type": "output_text", "text": "", "annotations": []}


class ResponseEncoder:
    """The Responses API's output items and streaming events, the same items whether streamed or not
    (``response`` is the finished response). A thinking model's reasoning is a ``reasoning`` item (its
    text as one ``reasoning_text`` part, streamed as ``response.reasoning_text.delta`` events; no
    summary is written), its answer a ``message`` item after it, and each function call its own item
    whose arguments stream as ``response.function_call_arguments.delta`` events. Each reasoning or
    message item is closed before the next item opens."""

    media_type = "text/event-stream"

    def __init__(self, rid: str, body: ResponsesBody, messages: list, store: ResponseStore,
                 search: FileSearch | None = None):
        self.rid, self.body, self.messages, self.store, self.search = rid, body, messages, store, search
        self.seq, self.text, self.calls = 0, "", []
        self.names = ToolNames(body.tools)
        self.items: list[dict[str, Any]] = []  # finished items, in output order
        self.cutter = None
        if search is not None:  # the search ran before the reply: its item comes first
            self.items.append(search.item())
            self.cutter = CitationCutter(len(search.passages))
        self.part: _Part | None = None  # the reasoning or message item open now
        self.tracker, self.call_items = CallTracker(), {}  # call index -> (output index, item)
        self.response: dict[str, Any] | None = None

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        return sse({"type": kind, "sequence_number": self.seq, **data}, kind)

    def start(self) -> list[bytes]:
        created = response_object(self.rid, self.body, [], None, "in_progress")
        return [self._event("response.created", response=created),
                self._event("response.in_progress", response=created), *self._search_events()]

    def _search_events(self) -> list[bytes]:
        """The file_search_call item's events: it was done before the reply began, so all at once."""
        if self.search is None:
            return []
        where = {"output_index": 0, "item_id": self.search.id}
        return [self._event("response.output_item.added", output_index=0, item=self.search.item("in_progress")),
                *(self._event(f"response.file_search_call.{step}", **where)
                  for step in ("in_progress", "searching", "completed")),
                self._event("response.output_item.done", output_index=0, item=self.items[0])]

    def _next_index(self) -> int:
        return len(self.items) + (self.part is not None) + len(self.call_items)

    def _open(self, kind: str) -> list[bytes]:
        out = self._close()
        self.part = part = _Part(kind, self._next_index(), self.body.logprobs)
        return out + [self._event("response.output_item.added", output_index=part.index, item=part.item("in_progress", "")),
                      self._event("response.content_part.added", item_id=part.id, output_index=part.index,
                                  content_index=0, part=part.empty_part())]

    def _close(self, status: str = "completed") -> list[bytes]:
        part, self.part = self.part, None
        if part is None:
            return []
        where = {"item_id": part.id, "output_index": part.index, "content_index": 0}
        cited = self._cite(part, where) if part.kind == "message" and self.cutter is not None else []
        item = part.item(status)
        if part.kind == "reasoning":
            done = [self._event("response.reasoning_text.done", **where, text=part.text)]
        else:
            logprobs = logprob_entries(part.logprobs, with_bytes=False) if part.logprobs is not None else []
            done = [self._event("response.output_text.done", **where, text=part.text, logprobs=logprobs)]
        self.items.append(item)
        return cited + done + [self._event("response.content_part.done", **where, part=item["content"][0]),
                       self._event("response.output_item.done", output_index=part.index, item=item)]

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind in ("text", "reasoning") and not self.call_items:  # text after a call is not an item
            return self._delta(chunk)
        if chunk.kind in ("tool_call_delta", "tool_calls"):
            if chunk.kind == "tool_calls":
                self.calls += chunk.tool_calls or []
            return [b for update in self.tracker.updates(chunk) for b in self._call_update(*update)]
        if chunk.kind == "done":
            return self._finish(chunk)
        return []

    def _delta(self, chunk: Chunk) -> list[bytes]:
        kind = "message" if chunk.kind == "text" else "reasoning"
        out = self._open(kind) if self.part is None or self.part.kind != kind else []
        part = self.part
        where = {"item_id": part.id, "output_index": part.index, "content_index": 0}
        if kind == "reasoning":
            part.text += chunk.text
            return out + [self._event("response.reasoning_text.delta", **where, delta=chunk.text)]
        text = self.cutter.feed(chunk.text) if self.cutter is not None else chunk.text  # [n] markers cut out
        part.text += text
        self.text += text
        entries = []
        if part.logprobs is not None:
            part.logprobs += chunk.logprobs or []
            entries = logprob_entries(chunk.logprobs, with_bytes=False)
        if not text and not entries:
            return out
        return out + [self._event("response.output_text.delta", **where, delta=text, logprobs=entries)]

    def _cite(self, part: _Part, where: dict[str, Any]) -> list[bytes]:
        """The message's held-back text and its file_citation annotations, as it closes."""
        out = []
        if rest := self.cutter.end():
            part.text += rest
            self.text += rest
            out.append(self._event("response.output_text.delta", **where, delta=rest, logprobs=[]))
        part.annotations = self.search.annotations(self.cutter.citations, len(part.text))
        return out + [self._event("response.output_text.annotation.added", **where, annotation_index=i, annotation=a)
                      for i, a in enumerate(part.annotations)]

    def _call_update(self, index: int, head: ToolCall | None, fragment: str) -> list[bytes]:
        out = []
        if head is not None:
            out += self._close()
            item = {"type": "function_call", "id": new_id("fc_"), "call_id": head.id, **self.names.for_client(head.name),
                    "arguments": "", "status": "in_progress"}
            self.call_items[index] = (self._next_index(), item)
            out.append(self._event("response.output_item.added", output_index=self.call_items[index][0],
                                   item=dict(item)))
        at, item = self.call_items[index]
        if fragment:
            item["arguments"] += fragment
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=at,
                                   delta=fragment))
        return out

    def _finish(self, done: Chunk) -> list[bytes]:
        out = []
        cut = done.finish_reason == "length"  # the item the limit cut (the last one) is incomplete, as there
        if not self.items and self.part is None and not self.call_items:  # an empty reply: one empty message
            out += self._open("message")
        out += self._close("incomplete" if cut and not self.call_items else "completed")
        items = list(self.items)
        last = max(self.call_items, default=None)
        for index, (at, item) in sorted(self.call_items.items()):
            if index < len(self.calls):
                item["arguments"] = self.calls[index].arguments
            item["status"] = "incomplete" if cut and index == last else "completed"
            out += [self._event("response.function_call_arguments.done", item_id=item["id"], output_index=at,
                                arguments=item["arguments"]),
                    self._event("response.output_item.done", output_index=at, item=item)]
            items.append(item)
        remember(self.store, self.body, self.rid, self.messages, self.text, self.calls)
        status = "incomplete" if cut else "completed"
        self.response = response_object(self.rid, self.body, items, done.usage, status)
        return out + [self._event(f"response.{status}", response=self.response)]

    def error(self, exc: BaseException) -> list[bytes]:
        return [self._event("error", **error_body("openai", describe(exc))["error"])]

    def end(self) -> list[bytes]:
        return []

    def final(self, chunks: list[Chunk]) -> dict[str, Any] | None:
        for chunk in chunks:  # the same items the stream would have sent
            self.chunk(chunk)
        if self.response is None:
            self.chunk(Chunk("done", finish_reason="stop"))
        return self.response
