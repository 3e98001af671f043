"""The Anthropic dialect: ``POST /v1/messages`` (whole or streamed) and ``/v1/messages/count_tokens``.

Anthropic messages carry content blocks: ``text``, ``tool_use`` (assistant) and ``tool_result``
(user). They become the engine's OpenAI-shaped messages (tool uses as ``tool_calls``, each tool result
as a ``tool`` message), and the reply's chunks become blocks again: text, ``thinking`` for reasoning,
``tool_use`` with its input. A stream is the event sequence Anthropic's SDKs expect:
``message_start`` (with the prompt's real token count), then per block ``content_block_start``/
``_delta``/``_stop`` (a tool's input as ``input_json_delta`` fragments while the model writes it), then
``message_delta`` with the stop reason (``stop_sequence`` and the string, when one of
``stop_sequences`` ended the reply) and usage, and ``message_stop``. ``thinking`` ``disabled`` turns a
template's thinking off (``enable_thinking``), ``enabled`` asks for it; count_tokens reads it too.
``system`` turns anywhere in ``messages`` join the system prompt. A stream whose first token is slow
(a long prompt) starts early and sends ``ping`` events meanwhile (``streaming.py``, ``keepalive``).
The request is run by ``handler.answer``, as every dialect's is; this module only translates.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import Discriminator, Field, Tag
from starlette.concurrency import run_in_threadpool

from ..types import ChatRequest, Chunk, Sampling, ToolCall, Usage
from .context import context, new_id
from .errors import ApiError, describe, error_body
from .handler import answer
from .imagebudget import decoded
from .inbound import Refusal, check_tool_choice, given, message_content, refuse, sampling, text_of
from .outbound import CallTracker, arguments_dict, reply_parts, sse
from .validation import Body, Count, Name, StopText, Tokens, Unit, dumped

router = APIRouter(prefix="/v1/messages", tags=["Anthropic"])  # routes only; state comes from app.state
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "cancelled": "end_turn"}


class TextBlock(Body):
    type: Literal["text"]
    text: str


class ImageBlock(Body):
    type: Literal["image", "document"]


class ToolUseBlock(Body):
    type: Literal["tool_use"]
    id: str = ""
    name: Name
    input: dict[str, Any] = {}


class ToolResultBlock(Body):
    type: Literal["tool_result"]
    tool_use_id: str = ""
    content: str | list[Annotated[TextBlock | ImageBlock, Field(discriminator="type")]] | None = None


class OtherBlock(Body):
    """A block this server does not read (a previous turn's ``thinking``, server tool results...): left
    out of the prompt, as before the blocks were typed, rather than refusing an agent's history."""

    type: Name


_BLOCKS = {"text": "text", "image": "image", "document": "image", "tool_use": "tool_use", "tool_result": "tool_result"}


def _block_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return _BLOCKS.get(kind, "other") if isinstance(kind, str) else "other"


Block = Annotated[Annotated[TextBlock, Tag("text")] | Annotated[ImageBlock, Tag("image")]
                  | Annotated[ToolUseBlock, Tag("tool_use")] | Annotated[ToolResultBlock, Tag("tool_result")]
                  | Annotated[OtherBlock, Tag("other")], Discriminator(_block_kind)]


class Message(Body):
    """A turn. ``system`` turns may stand anywhere among them (Claude Code sends its list of agents and
    skills as one, under the ``mid-conversation-system`` beta); their text joins the system prompt."""

    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


class Tool(Body):
    """A client tool. Anthropic's server tools (``web_search_20250305``...) run on Anthropic's side, so
    one given here is refused rather than offered to the model as a function it cannot use."""

    type: Literal["custom"] | None = None
    name: Name
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ToolChoice(Body):
    type: Literal["auto", "any", "tool", "none"] = "auto"
    name: Name | None = None
    disable_parallel_tool_use: bool = False


REFUSALS: list[Refusal] = [
    ("mcp_servers", given, "MCP servers are not connected by this server: run the tools on your side"),
    ("container", given, "code-execution containers are not available on this server"),
]


class OutputFormat(Body):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(Body):
    """Structured outputs: ``format`` constrains the reply to a JSON Schema; ``effort`` is a hint the
    models here have no setting for (ignored)."""

    format: OutputFormat | None = None
    effort: str | None = None


class CountBody(Body):
    model: Name
    messages: list[Message] = Field(min_length=1)
    system: str | list[TextBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: dict[str, Any] | None = None


class MessagesBody(CountBody):
    max_tokens: Tokens
    stream: bool = False
    stop_sequences: list[StopText] | None = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: Unit | None = None
    top_k: Count | None = None
    output_config: OutputConfig | None = None


def engine_messages(body: CountBody) -> list[dict[str, Any]]:
    """The engine's messages: one system message first, holding ``system`` and the text of every
    ``system`` turn in order (most templates allow a system message only at the start, and some
    raise on any other), then the conversation."""
    if all(m.role == "system" for m in body.messages):
        raise ApiError("messages: a user or assistant turn is needed besides system turns", param="messages")
    system = [text_of(dumped(body.system))] if body.system else []
    system += [text_of(dumped(m.content)) for m in body.messages if m.role == "system"]
    out: list[dict[str, Any]] = [{"role": "system", "content": "\n\n".join(t for t in system if t)}] if system else []
    for m in body.messages:
        if m.role == "system":
            continue
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
        else:
            out.extend(_block_messages(m.role, m.content))
    return out


def _block_messages(role: str, blocks: list[Any]) -> list[dict[str, Any]]:
    texts = [dumped(b) for b in blocks if isinstance(b, (TextBlock, ImageBlock))]
    uses = [b for b in blocks if isinstance(b, ToolUseBlock)]
    out = [{"role": "tool", "tool_call_id": r.tool_use_id, "content": text_of(dumped(r.content))}
           for r in blocks if isinstance(r, ToolResultBlock)]
    if texts or uses:
        msg: dict[str, Any] = {"role": role, "content": message_content(role, texts, "messages")}
        if uses:
            msg["tool_calls"] = [{"id": u.id, "type": "function",
                                  "function": {"name": u.name, "arguments": json.dumps(u.input)}} for u in uses]
        out.append(msg)
    return out


def engine_tools(body: CountBody) -> tuple[list[dict] | None, str | dict]:
    tools = [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                               "parameters": t.input_schema or {"type": "object"}}}
             for t in body.tools or []] or None
    choice = body.tool_choice or ToolChoice()
    mapped = {"auto": "auto", "any": "required", "none": "none"}.get(choice.type) or {"name": choice.name}
    return tools, check_tool_choice(tools, mapped) if tools else "auto"


def chat_request(body: MessagesBody) -> ChatRequest:
    refuse(body, REFUSALS)
    tools, choice = engine_tools(body)
    s = sampling(max_tokens=body.max_tokens, temperature=body.temperature, top_p=body.top_p, top_k=body.top_k,
                 stop=body.stop_sequences)
    fmt = body.output_config.format if body.output_config else None
    return ChatRequest(messages=engine_messages(body), sampling=s, tools=tools, tool_choice=choice,
                       json_schema=fmt.schema_ if fmt else None, enable_thinking=thinking_switch(body.thinking),
                       template_param="thinking")


def thinking_switch(thinking: dict[str, Any] | None) -> bool | None:
    """``thinking`` as the template's ``enable_thinking``: ``disabled`` turns it off, ``enabled`` (its
    ``budget_tokens`` not enforced) and ``between_tools`` ask for it; ``adaptive`` (the model decides) or
    none leaves the template's default."""
    kind = (thinking or {}).get("type")
    return {"disabled": False, "enabled": True, "between_tools": True}.get(kind) if isinstance(kind, str) else None


def usage_of(u: Usage | None) -> dict:
    u = u or Usage()
    # Anthropic counts input_tokens after the cache: the whole prompt is input + cache_read_input_tokens
    return {"input_tokens": u.evaluated_prompt_tokens, "output_tokens": u.completion_tokens,
            "cache_read_input_tokens": u.cached_tokens}


@router.post("")
async def messages(body: MessagesBody, request: Request):
    req = chat_request(body)  # every field checked before the model is looked up or loaded
    encoder = MessageEncoder(body.model)
    one = body.tool_choice is not None and body.tool_choice.disable_parallel_tool_use
    return await answer(request, body.model, req, encoder, streamed=body.stream, call_limit=1 if one else None,
                        prepare=encoder.count_prompt if body.stream else None)


def stop_fields(done: Chunk) -> dict[str, Any]:
    """``stop_reason`` and ``stop_sequence`` as Anthropic sets them: "stop_sequence" and the string
    when one of ``stop_sequences`` ended the reply."""
    if done.finish_reason == "stop" and done.stop_sequence is not None:
        return {"stop_reason": "stop_sequence", "stop_sequence": done.stop_sequence}
    return {"stop_reason": STOP_REASONS.get(done.finish_reason or "stop", "end_turn"), "stop_sequence": None}


@router.post("/count_tokens")
async def count_tokens(body: CountBody, request: Request) -> dict:
    ctx = context(request)
    tools, choice = engine_tools(body)
    req = ChatRequest(messages=engine_messages(body), tools=tools, tool_choice=choice,
                      enable_thinking=thinking_switch(body.thinking), template_param="thinking")
    req = await decoded(ctx.policy, req)  # as the shared handler does: weighed, then decoded off the loop
    model_id = await ctx.model_for(body.model)
    if ctx.engine.is_remote(model_id):
        return {"input_tokens": await run_in_threadpool(_remote_count, ctx, model_id, req)}
    return {"input_tokens": await run_in_threadpool(ctx.engine.count_chat_tokens, model_id, req)}


def _remote_count(ctx: Any, model_id: str, req: ChatRequest) -> int:
    """A remote model's prompt tokens, as the remote counts them: the OpenAI dialect remotes speak has no
    counting route, so ask for a one-token reply and read its ``usage.prompt_tokens`` (the remote's own
    tokenizer and template). A remote that reports no usage gets a 400 saying so, never a guess."""
    probe = replace(req, sampling=Sampling(temperature=0.0, max_tokens=1))
    chunks = list(ctx.engine.chat(model_id, probe))
    usage = next((c.usage for c in reversed(chunks) if c.kind == "done" and c.usage), None)
    if usage is None or usage.prompt_tokens <= 0:
        raise ApiError(f"count_tokens cannot count for {model_id}: its remote engine reports no token usage, and "
                       "its tokenizer is not known here", param="model")
    return usage.prompt_tokens


class MessageEncoder:
    """Anthropic's streaming events for one reply (one content block open at a time), or the whole message."""

    media_type = "text/event-stream"

    def __init__(self, model: str, input_tokens: int = 0):
        self.id, self.model, self.index, self.open, self.failed = new_id("msg_"), model, -1, None, False
        self.input_tokens = input_tokens
        self.calls, self.call_blocks = CallTracker(), {}  # call index -> its block's index

    def count_prompt(self, ctx: Any, model_id: str, req: ChatRequest) -> ChatRequest:
        """The prompt's tokens, for ``message_start`` (a remote model's count comes only with its reply)."""
        self.input_tokens = 0 if ctx.engine.is_remote(model_id) else ctx.engine.count_chat_tokens(model_id, req)
        return req

    def _message(self, content: list[dict], **fields: Any) -> dict:
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                **fields}

    def start(self) -> list[bytes]:
        message = self._message([], stop_reason=None, stop_sequence=None,
                                usage=usage_of(Usage(prompt_tokens=self.input_tokens)))
        return [sse({"type": "message_start", "message": message}, "message_start")]

    def keepalive(self) -> list[bytes]:
        """A ``ping``, as Anthropic's API sends while a reply is on its way (``streaming.py`` sends it
        while a long prompt is evaluated, after an early ``message_start``)."""
        return [sse({"type": "ping"}, "ping")]

    def _switch(self, kind: str | None, block: dict | None = None) -> list[bytes]:
        out = []
        if self.open is not None:
            out.append(sse({"type": "content_block_stop", "index": self.index}, "content_block_stop"))
            self.open = None
        if kind is not None:
            self.index, self.open = self.index + 1, kind
            out.append(sse({"type": "content_block_start", "index": self.index, "content_block": block},
                           "content_block_start"))
        return out

    def _delta(self, delta: dict) -> bytes:
        return sse({"type": "content_block_delta", "index": self.index, "delta": delta}, "content_block_delta")

    def chunk(self, chunk: Chunk) -> list[bytes]:
        if chunk.kind == "text":
            out = [] if self.open == "text" else self._switch("text", {"type": "text", "text": ""})
            return out + [self._delta({"type": "text_delta", "text": chunk.text})]
        if chunk.kind == "reasoning":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            out = [] if self.open == "thinking" else self._switch("thinking", block)
            return out + [self._delta({"type": "thinking_delta", "thinking": chunk.text})]
        if chunk.kind in ("tool_call_delta", "tool_calls"):
            return [b for index, head, fragment in self.calls.updates(chunk) for b in self._tool(index, head, fragment)]
        return self._switch(None) + [sse({"type": "message_delta", "delta": stop_fields(chunk),
                                          "usage": usage_of(chunk.usage)}, "message_delta")]

    def _tool(self, index: int, head: ToolCall | None, fragment: str) -> list[bytes]:
        """A tool_use block opens with the call's id and name; its input follows as ``input_json_delta``s."""
        out = []
        if head is not None:
            out += self._switch("tool_use", {"type": "tool_use", "id": head.id, "name": head.name, "input": {}})
            self.call_blocks[index] = self.index
        elif self.call_blocks.get(index) != self.index:  # another block is open: Anthropic cannot go back
            return []
        if fragment:
            out.append(self._delta({"type": "input_json_delta", "partial_json": fragment}))
        return out

    def error(self, exc: BaseException) -> list[bytes]:
        self.failed = True
        return [sse(error_body("anthropic", describe(exc)), "error")]

    def end(self) -> list[bytes]:
        return [] if self.failed else [sse({"type": "message_stop"}, "message_stop")]

    def final(self, chunks: list[Chunk]) -> dict:
        text, reasoning, calls, done = reply_parts(chunks)
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
        if text:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": c.id, "name": c.name, "input": arguments_dict(c)} for c in calls]
        return self._message(content, **stop_fields(done), usage=usage_of(done.usage))
