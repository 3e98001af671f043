"""The request body of OpenAI's Responses API (``POST /v1/responses``) as pydantic models: the input items,
reasoning and text options, the tools and tool choice, and ``ToolNames``, which gives each offered function the
name the model sees. ``responses.py`` turns a body into an engine request and its reply into output items."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from .errors import ApiError
from .inbound import Content, ContentPart, Effort, ToolChoice
from .validation import Body, Name, Tokens, Unit

LOGPROBS = "message.output_text.logprobs"  # the one ``include`` value that changes what is generated here
ROOM = 256  # the reply's room truncation "auto" leaves when max_output_tokens does not say


class InputItem(Body):
    type: Literal["message", "function_call", "function_call_output", "reasoning"] = "message"
    role: Literal["user", "assistant", "system", "developer"] = "user"
    content: Content = None
    call_id: str = ""
    name: Name | None = None
    namespace: Name | None = None  # a function_call of a function in a namespace tool
    arguments: str = "{}"
    output: str | list[ContentPart] = ""


class ReasoningOptions(Body):
    effort: Effort | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None  # accepted: no summary is written here


class ResponsesTool(Body):
    type: Name
    name: Name | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    tools: list[ResponsesTool] | None = None  # namespace: the functions it groups
    vector_store_ids: list[str] | None = None  # file_search
    max_num_results: Annotated[int, Field(ge=1, le=50)] | None = None
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] | None = None


class FlatChoice(Body):
    type: Literal["function"] = "function"
    name: Name


class HostedChoice(Body):
    """A hosted tool forced by type (``{"type": "file_search"}``)."""

    type: Name

    @field_validator("type")
    @classmethod
    def _not_function(cls, kind: str) -> str:
        if kind == "function":
            raise ValueError("a function tool_choice needs the function's name")
        return kind


class ToolNames:
    """The names the model sees for the request's function tools, and back: a namespace's function is
    seen by its own name, or ``namespace.name`` where that is taken by another tool."""

    def __init__(self, tools: list[ResponsesTool] | None):
        members = [(None, t) for t in tools or [] if t.type == "function"]
        members += [(ns.name, t) for ns in tools or [] if ns.type == "namespace" for t in ns.tools or []
                    if t.type == "function"]
        counts: dict[str | None, int] = {}
        for _, t in members:
            counts[t.name] = counts.get(t.name, 0) + 1
        self.functions: list[tuple[str, ResponsesTool]] = []  # (the name the model sees, the tool)
        self.origin: dict[str, tuple[str, str]] = {}  # a seen name -> (namespace, name), for namespaced ones
        for ns, t in members:
            if t.name is None:
                raise ApiError("tools: a function tool needs a name", param="tools")
            seen = t.name if ns is None or counts[t.name] == 1 else f"{ns}.{t.name}"
            self.functions.append((seen, t))
            if ns is not None:
                self.origin[seen] = (ns, t.name)
        self.seen = {v: k for k, v in self.origin.items()}

    def for_model(self, namespace: str | None, name: str) -> str:
        return self.seen.get((namespace, name), name) if namespace else name

    def for_client(self, seen: str) -> dict[str, str]:
        """A call's ``name`` (and ``namespace``) as the client named the function."""
        if seen in self.origin:
            ns, name = self.origin[seen]
            return {"name": name, "namespace": ns}
        return {"name": seen}


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
    tool_choice: ToolChoice | FlatChoice | HostedChoice = None
    text: TextOptions | None = None
    parallel_tool_calls: bool = True
    max_tool_calls: Annotated[int, Field(ge=0)] | None = None
    truncation: Literal["auto", "disabled"] | None = None
    include: list[str] | None = None
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None
    reasoning: ReasoningOptions | None = None

    @property
    def logprobs(self) -> bool:
        return LOGPROBS in (self.include or [])

    @property
    def call_limit(self) -> int | None:
        """How many function calls a reply may keep (None: any)."""
        limits = [n for n in (self.max_tool_calls, None if self.parallel_tool_calls else 1) if n is not None]
        return min(limits) if limits else None
