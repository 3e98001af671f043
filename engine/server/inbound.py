"""The request side every dialect shares: from a client's fields to the engine's ``ChatRequest``.

The dialects name the same knobs differently (``max_tokens``, ``num_predict``, ``max_output_tokens``);
each maps its names once and calls ``sampling`` with the engine's, so defaults and checks live here
once, beside refused fields, message text, tool choice, and the request parts both OpenAI dialects
(chat completions and Responses) read. The reply side is ``outbound.py``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from typing import Any, Literal

from ..prompts import MAX_IMAGE_BYTES, ImageFile, probe_image
from ..types import ChatRequest, Sampling
from .errors import ApiError
from .validation import Body, Name

MAX_STOPS = 16
IMAGE_PARTS = ("image_url", "image", "input_image")  # OpenAI chat, Anthropic, Responses
LINK_PART = "image_link"  # an http(s) image URL a client named, until the shared handler fetches it
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?((?:;[\w.+-]+=[^;,]*)*);base64,", re.IGNORECASE)


def sampling(**given: Any) -> Sampling:
    """A ``Sampling`` from the options a client gave (None means "not given": keep the default)."""
    s = Sampling()
    for name, value in given.items():
        if value is None:
            continue
        if name == "stop":
            value = [value] if isinstance(value, str) else list(value)
            if len(value) > MAX_STOPS:
                raise ApiError(f"at most {MAX_STOPS} stop strings", param="stop")
        if name == "max_tokens" and value is not None and value < 1:
            raise ApiError("max_tokens must be at least 1", param="max_tokens")
        if name == "seed" and value < 0:
            continue  # -1: a random seed, as Ollama and llama.cpp read it
        setattr(s, name, value)
    return s


Refusal = tuple[str, Callable[[Any], bool], str]  # (field, "is this value refused?", why)


def given(value: Any) -> bool:
    """A field a client really set: not absent, null, false, empty or zero."""
    return value not in (None, False, "", 0) and value != [] and value != {}


def refuse(body: Any, refusals: list[Refusal]) -> None:
    """A 400 naming the first field whose value this server cannot honour, where ignoring it would
    change the result (``n: 2``, ``logit_bias``, audio...). Fields this server does not declare are
    read from the body's extras, so an undeclared field can be refused too."""
    extra = getattr(body, "model_extra", None) or {}
    for name, refused, why in refusals:
        value = getattr(body, name, None) if name in type(body).model_fields else extra.get(name)
        if refused(value):
            raise ApiError(f"{name}: {why}", param=name)


def text_of(content: Any) -> str:
    """The text of a message's content: a string, or a list of text parts (images are refused)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") in IMAGE_PARTS:
                raise ApiError("messages: images are read in user messages only", param="messages")
            elif isinstance(part, dict) and part.get("type") not in ("refusal", "thinking", "redacted_thinking"):
                kind = part.get("type")  # audio, files, documents...: ignoring them would change the answer
                raise ApiError(f"messages: content parts of type {kind!r} are not supported (text only)",
                               param="messages")
        return "".join(parts)
    raise ApiError("message content must be a string or a list of text parts", param="messages")


def content_of(content: Any, where: str = "messages") -> str | list[dict[str, Any]]:
    """A user message's content for the engine: its text, or, when it holds images, a list of text parts
    and ``ImageFile`` parts (``prompts/images.py``), in order. A bad image is a 400 naming where it was."""
    if not (isinstance(content, list) and any(isinstance(p, dict) and p.get("type") in IMAGE_PARTS for p in content)):
        return text_of(content)
    parts: list[dict[str, Any]] = []
    for i, part in enumerate(content):
        if isinstance(part, dict) and part.get("type") in IMAGE_PARTS:
            parts.append(image_of(part, f"{where}.content[{i}]"))
        else:
            parts.append({"type": "text", "text": text_of([part])})
    return parts


def message_content(role: str, content: Any, where: str) -> str | list[dict[str, Any]]:
    """A message's content: a user's may hold images (``content_of``), any other role's is text."""
    return content_of(content, where) if role == "user" else text_of(content)


def image_of(part: dict[str, Any], where: str) -> dict[str, Any]:
    """The image part of one content part, in any dialect's shape: OpenAI chat's ``image_url``
    (``{"url"}``), Responses' ``input_image`` (``image_url`` a string) and Anthropic's ``image``
    (``source``). Inline data becomes an ``ImageFile`` part (its header checked); an http(s) URL a link
    part, fetched or refused once the request is in the shared handler (``imagelinks.py``), where every
    image is weighed and decoded (``imagebudget.py``)."""
    source = part.get("source")
    if part.get("type") == "image" and isinstance(source, dict):
        if source.get("type") == "base64":
            return image_from_base64(source.get("data"), source.get("media_type"), where).part()
        url = source.get("url") if source.get("type") == "url" else None
    else:
        url = part.get("image_url")
        url = url.get("url") if isinstance(url, dict) else url
    if not isinstance(url, str) or not url:
        raise ApiError(f"{where}: the image part has no image (a data: URL or base64 data)", param="messages")
    if url[:8].lower().startswith(("http://", "https://")):
        return {"type": LINK_PART, "url": url, "where": where}
    return image_from_url(url, where).part()


def image_from_url(url: str, where: str) -> ImageFile:
    """An image from a ``data:`` URL (http(s) URLs are links: ``image_of``); any other scheme is a 400."""
    m = _DATA_URL.match(url)
    if m is None:
        scheme = url.split(":", 1)[0].lower() if ":" in url[:12] else "a bare"
        raise ApiError(f"{where}: images are read from data: URLs (base64) or http(s) URLs, not from {scheme} "
                       "URLs; send the image inline", param="messages", code="invalid_image")
    return image_from_base64(url[m.end():], m.group(1), where)


def image_from_base64(data: Any, media_type: str | None, where: str) -> ImageFile:
    """Base64 image data (Ollama's ``images`` items, Anthropic's ``source.data``) as an ``ImageFile``: its
    header checked here, its pixels decoded in the shared handler (``imagebudget.py``)."""
    if not isinstance(data, str) or not data:
        raise ApiError(f"{where}: the image data is missing", param="messages", code="invalid_image")
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise ApiError(f"{where}: the image is over {MAX_IMAGE_BYTES:,} bytes", param="messages", code="invalid_image")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(f"{where}: the image data is not valid base64", param="messages", code="invalid_image") from None
    return probe_image(raw, media_type, where)


def check_tool_choice(tools: list[dict] | None, choice: Any) -> str | dict:
    """OpenAI's ``tool_choice`` checked against the tools given, in the engine's form."""
    if choice is None:
        return "auto"
    if isinstance(choice, str):
        if choice not in ("auto", "none", "required"):
            raise ApiError(f"tool_choice must be auto, none, required or a named function, not {choice!r}",
                           param="tool_choice")
        if choice == "required" and not tools:
            raise ApiError("tool_choice is required but no tools were given", param="tool_choice")
        return choice
    name = (choice.get("function") or choice).get("name") if isinstance(choice, dict) else None
    names = [(t.get("function") or t).get("name") for t in tools or []]
    if name not in names:
        raise ApiError(f"tool_choice names {name!r}, which is not among the tools given", param="tool_choice")
    return {"name": name}


def logprobs_option(wanted: bool | None, top: int | None, field: str = "top_logprobs") -> int | None:
    """The runtime's ``Sampling.logprobs`` from a ``logprobs`` flag and a ``top_logprobs`` count."""
    if top is not None and not wanted:
        raise ApiError(f"{field} needs logprobs: true", param=field)
    return (top or 0) if wanted else None


Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]  # OpenAI's ReasoningEffort


def effort_switch(effort: str | None) -> bool | None:
    """OpenAI's reasoning effort as the template's ``enable_thinking``: ``none`` turns thinking off, any
    other level asks for it (templates here have a switch, not a scale), absent leaves the default."""
    return None if effort is None else effort != "none"


class ContentPart(Body):
    type: Name
    text: str | None = None


Content = str | list[ContentPart | str] | None


class NamedFunction(Body):
    name: Name


class NamedChoice(Body):
    type: Literal["function"] = "function"
    function: NamedFunction


ToolChoice = Literal["auto", "none", "required"] | NamedChoice | None


def apply_format(req: ChatRequest, fmt: dict[str, Any] | None) -> None:
    """OpenAI's ``response_format`` (``text``, ``json_object`` or ``json_schema``) on ``req``."""
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
