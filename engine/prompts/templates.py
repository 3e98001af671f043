"""Render a conversation into a prompt with the model's own chat template, safely.

Templates come from GGUF files, which come from strangers, so they render in Jinja's
``ImmutableSandboxedEnvironment``: a template that reaches for Python internals (``__class__``,
``__globals__``, ``os.system``...) raises ``SecurityError`` and the user gets a ``TemplateError``
naming the model's template as the cause; nothing runs. The sandbox is ``sandbox.BoundedEnvironment``,
which sizes every growing operation before it runs and bounds steps and wall time; the prompt is
rendered as a stream and counted as it grows, so no template can allocate its way past the budgets
before being stopped. A model with no template falls back to
ChatML, and says so. Tools reach the template as ``tools``; when the template ignores them, their
definitions are put in the system prompt instead so the model still sees them.
"""

from __future__ import annotations

import json
import re
import secrets
from datetime import datetime
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.exceptions import TemplateError as JinjaTemplateError

from ..errors import ContextOverflow, TemplateError
from . import renderer
from .sandbox import MAX_STRFTIME_CHARS, MAX_VALUE_CHARS, BoundedEnvironment, over, rendering

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
TOOL_PROMPT = (
    "You can call these tools. To call one, reply with only this, and nothing else:\n"
    '<tool_call>\n{{"name": <tool name>, "arguments": <arguments object>}}\n</tool_call>\n\n'
    "Tools:\n{tools}"
)
MAX_PROMPT_CHARS = MAX_VALUE_CHARS
MAX_TEMPLATE_CHARS = 256 * 1024  # a template's source (real ones: 1 to 20 KB)
MAX_MESSAGES = 50_000  # messages in one conversation (each renders to a few tokens at least)
PLAIN_ROLES = ("user", "assistant", "tool")  # their content is text, never control tokens
# the names the renderer gives every template itself: a request's variables cannot replace them
TEMPLATE_NAMES = frozenset({"messages", "tools", "add_generation_prompt", "bos_token", "eos_token",
                            "raise_exception", "strftime_now"})


def _raise(message: str) -> None:
    raise TemplateError(f"the model's chat template refused the conversation: {message}")


def _strftime_now(fmt: str) -> str:
    if len(str(fmt)) > MAX_STRFTIME_CHARS:  # '%c' grows twelve-fold inside one C call
        raise over("value size", f"a strftime_now format of {MAX_STRFTIME_CHARS} characters")
    return datetime.now().strftime(fmt)


def _environment() -> BoundedEnvironment:
    env = BoundedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"], undefined=jinja2.Undefined)
    env.globals.update(raise_exception=_raise, strftime_now=_strftime_now)
    env.filters["tojson"] = lambda v, indent=None, **_: json.dumps(v, ensure_ascii=False, indent=indent)
    env.guard_filters()
    return env


_ENV = _environment()


class ChatTemplate:
    """A model's chat template. ``render`` runs on any thread; construct once per model.

    Compiling and rendering happen in a template worker process (``renderer.py``); this object holds
    the source and asks. Construction compiles the template once there, so a template that does not
    compile fails the load that reads it.
    """

    def __init__(self, source: str | None, bos_token: str | None = None, eos_token: str | None = None):
        self.fallback = not source
        self.name = "ChatML (fallback: the model has no chat template)" if self.fallback else "model"
        self.source = source or CHATML
        self.bos_token, self.eos_token = bos_token or "", eos_token or ""
        self.mentions_tools = "tools" in self.source
        if len(self.source) > MAX_TEMPLATE_CHARS:
            raise TemplateError(f"the model's chat template is refused: it is {len(self.source):,} characters long, "
                                f"over the {MAX_TEMPLATE_CHARS:,}-character limit (real ones are a few thousand)")
        renderer.ask({"op": "compile", "source": self.source})

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
               add_generation_prompt: bool = True, variables: dict[str, Any] | None = None) -> str:
        return "".join(text for text, _ in self.render_segments(messages, tools, add_generation_prompt, variables))

    def render_segments(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                        add_generation_prompt: bool = True,
                        variables: dict[str, Any] | None = None) -> list[tuple[str, bool]]:
        """The prompt as ``[(text, parse_special), ...]``: the template's markup (True) and the user,
        assistant and tool contents (False), which must be tokenized as plain text.

        ``variables`` are more variables for the template: ``enable_thinking`` (Qwen3's templates read
        it: false writes an empty ``<think></think>`` so the model answers at once; left out, a template
        keeps its own default) and a client's ``chat_template_kwargs``; none may be one of
        ``TEMPLATE_NAMES``, which the renderer sets.

        A conversation of more than ``MAX_MESSAGES`` messages, or one that renders past
        ``MAX_PROMPT_CHARS``, is a ``ContextOverflow``: no model's context holds it.
        """
        if len(messages) > MAX_MESSAGES:
            raise ContextOverflow(f"the conversation has {len(messages):,} messages, over the {MAX_MESSAGES:,} "
                                  "that Fireside renders into one prompt; shorten it")
        extra = {k: v for k, v in (variables or {}).items() if k not in TEMPLATE_NAMES}  # the server refuses those
        return renderer.ask({"op": "render", "source": self.source, "bos_token": self.bos_token,
                             "eos_token": self.eos_token, "messages": messages, "tools": tools,
                             "add_generation_prompt": add_generation_prompt, "variables": extra,
                             "mentions_tools": self.mentions_tools})


def run_job(job: dict[str, Any], compiled: dict[str, jinja2.Template]) -> Any:
    """A job from ``ChatTemplate``, done in a template worker: compile (cached in ``compiled``) or render."""
    source = job["source"]
    template = compiled.get(source)
    if template is None:
        template = compiled[source] = _compile(source)
    if job["op"] == "compile":
        return None
    return _Renderer(template, job["bos_token"], job["eos_token"]).segments(
        job["messages"], job["tools"], job["add_generation_prompt"], job["variables"], job["mentions_tools"])


def _compile(source: str) -> jinja2.Template:
    try:
        with rendering():
            return _ENV.from_string(source)
    except JinjaTemplateError as exc:
        raise TemplateError(f"the model's chat template does not compile: {exc}") from exc
    except (RecursionError, IndentationError):  # Python's parser allows 100 levels of blocks
        raise TemplateError("the model's chat template does not compile: it nests too deeply") from None
    except MemoryError:
        raise over("memory", "the memory its worker process may use") from None
    except Exception as exc:  # what Jinja's code generation let through to Python's compile()
        raise TemplateError(f"the model's chat template does not compile: {type(exc).__name__}: {exc}") from exc


class _Renderer:
    """One compiled template with its special tokens, rendering in a template worker."""

    def __init__(self, template: jinja2.Template, bos_token: str, eos_token: str):
        self._template, self.bos_token, self.eos_token = template, bos_token, eos_token

    def segments(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                 add_generation_prompt: bool, extra: dict[str, Any], mentions_tools: bool) -> list[tuple[str, bool]]:
        """See ``ChatTemplate.render_segments``. The text is always exactly what the template renders.
        To find the contents in it, the template is also rendered with each content replaced by a
        unique marker; when that render, with the contents put back, is the same text, the markers
        say exactly where each content is. A template that transforms contents (trims them, strips
        reasoning from old turns) makes the two differ; then each content is looked for verbatim (or
        trimmed), in order, and one that the template changed otherwise stays in the markup.
        """
        messages = [_normalize(m) for m in messages]
        if tools and not mentions_tools:
            messages = _tools_in_system(messages, tools)
        nonce = secrets.token_hex(8)
        contents: dict[str, str] = {}
        marked = []
        for i, m in enumerate(messages):
            if m.get("role") in PLAIN_ROLES and isinstance(m.get("content"), str) and m["content"]:
                key = f"FiresideContent{nonce}N{i}X"
                contents[key] = m["content"]
                m = {**m, "content": key}
            marked.append(m)
        prompt = self._checked_render(messages, tools, add_generation_prompt, extra)
        if not contents:
            return [(prompt, True)]
        try:  # the markers are longer than short contents: this render may pass the budget the first did not
            segments = _split(self._checked_render(marked, tools, add_generation_prompt, extra), nonce, contents)
        except ContextOverflow:
            segments = None
        if segments is None or "".join(t for t, _ in segments) != prompt:
            segments = _find_in_order(prompt, list(contents.values()))
        return segments

    def _checked_render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        add_generation_prompt: bool, extra: dict[str, Any]) -> str:
        try:
            return self._render(messages, tools, add_generation_prompt, extra)
        except SecurityError as exc:
            raise TemplateError(f"the model's chat template tried something unsafe and was stopped ({exc}); "
                                "this model file may be hostile") from exc
        except (TemplateError, ContextOverflow):
            raise
        except MemoryError:
            raise over("memory", "the memory its worker process may use") from None
        except RecursionError:
            raise TemplateError("the model's chat template failed to render: it recursed too deeply") from None
        except Exception as exc:  # a template is code: any failure inside it is the template's
            raise TemplateError(f"the model's chat template failed to render: {type(exc).__name__}: {exc}") from exc

    def _render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                add_generation_prompt: bool, extra: dict[str, Any]) -> str:
        """Render as a stream under a fresh budget, counting the prompt as it grows. ``extra``: more
        variables for the template (``enable_thinking``)."""
        with rendering(len(messages) + len(tools or ())) as spend:
            pieces, size = [], 0
            for piece in self._template.generate(messages=messages, tools=tools or None,
                                                 add_generation_prompt=add_generation_prompt,
                                                 bos_token=self.bos_token, eos_token=self.eos_token, **extra):
                size += len(piece)
                if size > MAX_PROMPT_CHARS:
                    raise _too_long(messages)
                spend.step()
                pieces.append(piece)
            return "".join(pieces)


def _too_long(messages: list[dict[str, Any]]) -> Exception:
    """The prompt passed ``MAX_PROMPT_CHARS``: the conversation's fault when it is itself that long (a 400
    for the client), else the template's (it built the text itself)."""
    own = sum(len(m["content"]) if isinstance(m.get("content"), str) else 0 for m in messages) + 16 * len(messages)
    if own > MAX_PROMPT_CHARS // 4:
        return ContextOverflow(f"the conversation renders to more than {MAX_PROMPT_CHARS:,} characters, "
                               "more than any model's context holds; shorten it")
    return over("output", f"a prompt of {MAX_PROMPT_CHARS:,} characters")


def _split(prompt: str, nonce: str, contents: dict[str, str]) -> list[tuple[str, bool]] | None:
    """Cut the rendered prompt at the markers, in one pass; None unless each marker is there exactly once."""
    parts = re.split(f"(FiresideContent{nonce}N\\d+X)", prompt)  # text, marker, text, ..., text
    found = parts[1::2]
    if len(found) != len(contents) or set(found) != contents.keys():
        return None
    segments: list[tuple[str, bool]] = [(parts[0], True)]
    for key, after in zip(found, parts[2::2]):
        segments += [(contents[key], False), (after, True)]
    return [(t, special) for t, special in segments if t]


def _find_in_order(prompt: str, contents: list[str]) -> list[tuple[str, bool]]:
    segments: list[tuple[str, bool]] = []
    cursor = 0
    for content in contents:
        at = prompt.find(content, cursor)
        if at < 0:  # templates often trim contents
            content = content.strip()
            at = prompt.find(content, cursor) if content else -1
        if at < 0:
            continue
        segments += [(prompt[cursor:at], True), (content, False)]
        cursor = at + len(content)
    segments.append((prompt[cursor:], True))
    return [(t, special) for t, special in segments if t]


def _normalize(message: dict[str, Any]) -> dict[str, Any]:
    """Give templates what they expect: string content (parts joined) and tool-call arguments as dicts."""
    m = dict(message)
    content = m.get("content")
    if isinstance(content, list):
        m["content"] = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    elif content is None:
        m["content"] = ""
    if m.get("tool_calls"):
        calls = []
        for call in m["tool_calls"]:
            fn = dict(call.get("function", call))
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except json.JSONDecodeError:
                    pass
            calls.append({**call, "function": fn, "type": "function"})
        m["tool_calls"] = calls
        if not m["content"]:
            m["content"] = "\n".join(
                "<tool_call>\n" + json.dumps({"name": c["function"]["name"], "arguments": c["function"].get("arguments")})
                + "\n</tool_call>" for c in calls)
    if m.get("role") == "tool":
        m.setdefault("name", m.get("tool_call_id", "tool"))
    return m


def _tools_in_system(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    described = "\n".join(json.dumps(t.get("function", t), ensure_ascii=False) for t in tools)
    block = TOOL_PROMPT.format(tools=described)
    out = [dict(m) for m in messages]
    for m in out:
        if m.get("role") == "tool":  # templates without tool support know no "tool" role
            m["role"] = "user"
            m["content"] = f"<tool_response>\n{m['content']}\n</tool_response>"
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{block}"
    else:
        out.insert(0, {"role": "system", "content": block})
    return out
