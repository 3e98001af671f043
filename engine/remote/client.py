"""One remote engine over HTTP: list its models, and stream chat and completion replies as engine chunks.

Requests go out in OpenAI's shape (``/v1/chat/completions``, ``/v1/completions``, ``/v1/embeddings``),
the one dialect every serving engine speaks, and the SSE stream comes back as the runtime's own
``Chunk`` values: ``text``, ``reasoning``, one ``tool_calls`` chunk once the streamed call fragments
are complete, and ``done`` with the finish reason and usage (token counts from the remote, timings
measured here). Log-probabilities asked for go out as OpenAI's ``logprobs``/``top_logprobs`` and
come back on the text chunks; a remote that answers without them is a ``RemoteUnsupported`` (a 400
naming ``logprobs``), never a reply that silently lacks them. A reply a stop string ended names it
(``stop_sequence``) when the remote says which one did (vLLM's and Fireside's ``stop_reason``):
OpenAI's own stream only says ``finish_reason: "stop"``, for a stop string and the model's own end
alike, so then it stays unknown. The thinking switch and chat-template variables go out as
``chat_template_kwargs`` (vLLM's, llama-server's, SGLang's and Fireside's field); a remote that
refuses it with an error naming it is a ``RemoteUnsupported`` naming the field the client set
(``ChatRequest.template_param``). Tools go out with ``tool_choice: "none"`` too, so the remote keeps
them in its prompt and makes no call, as a local model does. Failures become ``RemoteError`` (or ``ModelNotFound`` for a 404) with the remote's
own message. Connecting is bounded by a short timeout, so a dead remote answers within seconds;
``cancel`` is checked between events, and closing the generator closes the connection, which tells
the remote to stop.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from ..devices import CLIENT_IDLE_S, pinned_context
from ..errors import ModelNotFound, RemoteUnreachable, RemoteUnsupported
from ..types import (
    IMAGE_PART,
    ChatRequest,
    Chunk,
    CompletionRequest,
    Image,
    Sampling,
    TokenLogprob,
    ToolCall,
    Usage,
)
from .registry import RemoteEndpoint, RemoteError

CONNECT_TIMEOUT_S = 3.0
LIST_TIMEOUT_S = 4.0
READ_TIMEOUT_S = 300.0  # the longest wait for the next event of a reply (a big prompt on a busy engine)


def _wire_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as JSON can carry them: each ``Image`` part as OpenAI's ``image_url``, a PNG data URL."""
    def part(p: Any) -> Any:
        return {"type": "image_url", "image_url": {"url": _png_url(p["image"])}} \
            if isinstance(p, dict) and p.get("type") == IMAGE_PART else p

    return [{**m, "content": [part(p) for p in m["content"]]} if isinstance(m.get("content"), list) else m
            for m in messages]


def _png_url(image: Image) -> str:
    import base64
    import io

    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.frombytes("RGB", (image.width, image.height), image.pixels).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


class RemoteClient:
    """Thread-safe: one ``httpx.Client`` shared by every request to this remote."""

    def __init__(self, endpoint: RemoteEndpoint, api_key: str | None = None, client: httpx.Client | None = None,
                 pinned_pem: str | None = None):
        """``pinned_pem``: a paired device's certificate, the only one its TLS may present (no CA, no
        host-name check), over a connection kept open between chats (``CLIENT_IDLE_S``); otherwise https
        is verified against the system's CAs, as httpx does."""
        self.endpoint, self.device = endpoint, pinned_pem is not None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        verify = pinned_context(pinned_pem) if pinned_pem is not None else True
        limits = httpx.Limits(keepalive_expiry=CLIENT_IDLE_S) if self.device else httpx.Limits()
        self.http = client or httpx.Client(base_url=endpoint.base_url, headers=headers, verify=verify, limits=limits,
                                           timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S))

    def list_models(self) -> list[dict]:
        """The remote's ``/v1/models`` entries; ``RemoteError`` within a few seconds if it does not answer."""
        body = _json_or_text(self._call("GET", "/v1/models", timeout=LIST_TIMEOUT_S))
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise RemoteError(f"remote engine {self.endpoint.name!r} sent a model list without `data`")
        return [m for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]

    def embed(self, model: str, inputs: list[str]) -> tuple[list[list[float]], int]:
        body = self._call("POST", "/v1/embeddings", json={"model": model, "input": inputs}).json()
        vectors = [d["embedding"] for d in sorted(body.get("data", []), key=lambda d: d.get("index", 0))]
        return vectors, int((body.get("usage") or {}).get("prompt_tokens", 0))

    def chat(self, model: str, request: ChatRequest, cancel: threading.Event | None = None) -> Iterator[Chunk]:
        body = {"model": model, "messages": _wire_messages(request.messages), **_sampling(request.sampling, chat=True)}
        if request.tools:  # "none" too: the remote keeps them in its prompt and makes no call
            body["tools"], body["tool_choice"] = request.tools, _tool_choice(request.tool_choice)
        variables = dict(request.template_vars)
        if request.enable_thinking is not None:
            variables["enable_thinking"] = request.enable_thinking
        if variables:  # vLLM's, llama-server's, SGLang's and Fireside's field for chat-template variables
            body["chat_template_kwargs"] = variables
        if request.json_schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": request.json_schema}}
        elif request.json_mode:
            body["response_format"] = {"type": "json_object"}
        try:
            yield from self._stream("/v1/chat/completions", body, cancel, request.sampling)
        except RemoteError as exc:
            if "chat_template_kwargs" in body and "chat_template_kwargs" in str(exc):
                raise RemoteUnsupported(
                    f"{request.template_param}: remote engine {self.endpoint.name!r} refused chat_template_kwargs, "
                    f"which carries the thinking switch and template variables to it ({exc}); leave "
                    f"{request.template_param} out for its models", request.template_param) from None
            raise

    def complete(self, model: str, request: CompletionRequest,
                 cancel: threading.Event | None = None) -> Iterator[Chunk]:
        if request.grammar:
            raise RemoteError("GBNF grammars are not sent to remote engines")
        yield from self._stream("/v1/completions", {"model": model, "prompt": request.prompt,
                                                    **_sampling(request.sampling, chat=False)}, cancel, request.sampling)

    def _stream(self, path: str, body: dict, cancel: threading.Event | None, s: Sampling) -> Iterator[Chunk]:
        body.update(stream=True, stream_options={"include_usage": True})
        reader = _StreamReader(self.endpoint.name, s.stop, s.logprobs is not None)
        try:
            with self.http.stream("POST", path, json=body) as r:
                if r.status_code != 200:
                    r.read()
                    raise self._failure(r, body.get("model", ""))
                for line in r.iter_lines():
                    if cancel is not None and cancel.is_set():
                        reader.finish = "cancelled"
                        break
                    if line.startswith("data:") and (data := line[5:].strip()) != "[DONE]":
                        yield from reader.feed(self._event(data))
        except httpx.HTTPError as exc:
            if reader.first is None:
                raise self._unreachable(exc) from None
            raise RemoteError(f"{'device' if self.device else 'remote engine'} {self.endpoint.name!r} stopped "
                              f"answering mid-reply ({type(exc).__name__}: {exc or 'no detail'}); the reply ends "
                              f"here, cut short") from None
        yield from reader.end()

    def _event(self, data: str) -> dict:
        try:
            event = json.loads(data)
        except ValueError:
            raise RemoteError(f"remote engine {self.endpoint.name!r} sent a malformed event: {data[:120]}") from None
        if isinstance(event, dict) and "error" in event:
            raise RemoteError(f"remote engine {self.endpoint.name!r} failed mid-reply: {_message(event)}")
        return event

    def _call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            r = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self._unreachable(exc) from None
        if r.status_code != 200:
            raise self._failure(r, (kwargs.get("json") or {}).get("model", ""))
        return r

    def _unreachable(self, exc: httpx.HTTPError) -> RemoteError:
        """A ``RemoteUnreachable`` when no connection was made (nothing of the request reached the remote,
        so it may be asked again elsewhere), else a ``RemoteError``."""
        what = "did not answer in time" if isinstance(exc, httpx.TimeoutException) else "cannot be reached"
        error = RemoteUnreachable if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)) else RemoteError
        if self.device and "CERTIFICATE_VERIFY_FAILED" in str(exc):
            return error(f"device {self.endpoint.name!r} at {self.endpoint.base_url} answered with a certificate "
                               f"other than the one pinned when it was paired; refused (something else may be "
                               f"answering in its place; if it made a new certificate, pair again)")
        return error(f"{'device' if self.device else 'remote engine'} {self.endpoint.name!r} at {self.endpoint.base_url} {what} "
                           f"({type(exc).__name__}: {exc or 'no detail'}); local models are unaffected")

    def _failure(self, r: httpx.Response, model: str) -> Exception:
        name, message = self.endpoint.name, _message(_json_or_text(r))
        if r.status_code == 404 and model:
            return ModelNotFound(f"remote engine {name!r} has no model {model!r} ({message})")
        if r.status_code in (401, 403) and self.device:
            return RemoteError(f"device {name!r} refused this one (HTTP {r.status_code}: {message}); it may have "
                               f"revoked the pairing: pair again with `fireside devices pair {name}`")
        if r.status_code in (401, 403):
            return RemoteError(f"remote engine {name!r} refused the request (HTTP {r.status_code}: {message}); "
                               f"set its key with `fireside remote add {name} URL --api-key KEY`")
        return RemoteError(f"remote engine {name!r} answered HTTP {r.status_code}: {message}")

    def close(self) -> None:
        self.http.close()


class _StreamReader:
    """OpenAI stream events in, engine chunks out; tool-call fragments are joined by their index."""

    def __init__(self, remote: str = "", stops: list[str] | None = None, logprobs: bool = False) -> None:
        self.remote, self.stops, self.logprobs = remote, stops or [], logprobs
        self.start = time.perf_counter()
        self.first: float | None = None
        self.finish: str | None = None
        self.stop_sequence: str | None = None
        self.usage: dict = {}
        self.calls: dict[int, dict] = {}

    def feed(self, event: dict) -> Iterator[Chunk]:
        self.usage = event.get("usage") or self.usage
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            text = choice.get("text") or delta.get("content")
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if (text or reasoning) and self.first is None:
                self.first = time.perf_counter()
            if reasoning:
                yield Chunk("reasoning", reasoning)
            if text:
                yield Chunk("text", text, logprobs=self._logprobs(choice))
            for part in delta.get("tool_calls") or []:
                self._call_part(part)
            self.finish = choice.get("finish_reason") or self.finish
            if choice.get("stop_reason") in self.stops:  # vLLM's (and Fireside's) name for the stop string hit
                self.stop_sequence = choice["stop_reason"]

    def _logprobs(self, choice: dict) -> list[TokenLogprob] | None:
        if not self.logprobs:
            return None
        lp = choice.get("logprobs")
        if not isinstance(lp, dict):  # OpenAI sends them with every piece of text once asked
            raise RemoteUnsupported(f"logprobs: remote engine {self.remote!r} answered without log-probabilities, "
                                    "so it does not serve them; leave logprobs out for its models", "logprobs")
        if "content" in lp:  # chat: one entry per token
            return [TokenLogprob(str(e.get("token", "")), float(e.get("logprob", 0.0)),
                                 [(str(t.get("token", "")), float(t.get("logprob", 0.0)))
                                  for t in e.get("top_logprobs") or []]) for e in lp.get("content") or []]
        tops = lp.get("top_logprobs") or []  # completions: parallel lists, the alternatives as {token: logprob}
        return [TokenLogprob(str(token), float(logprob),
                             sorted(((str(t), float(x)) for t, x in (tops[i] or {}).items()), key=lambda p: -p[1])
                             if i < len(tops) else [])
                for i, (token, logprob) in enumerate(zip(lp.get("tokens") or [], lp.get("token_logprobs") or []))]

    def _call_part(self, part: dict) -> None:
        call = self.calls.setdefault(int(part.get("index", len(self.calls))), {"id": "", "name": "", "arguments": ""})
        fn = part.get("function") or {}
        call["id"] = part.get("id") or call["id"]
        call["name"] += fn.get("name") or ""
        call["arguments"] += fn.get("arguments") or ""

    def end(self) -> Iterator[Chunk]:
        if self.calls:
            yield Chunk("tool_calls", tool_calls=[ToolCall(c["name"], c["arguments"], c["id"])
                                                  for _, c in sorted(self.calls.items())])
        total = time.perf_counter() - self.start
        ttft = (self.first or time.perf_counter()) - self.start
        done = int(self.usage.get("completion_tokens", 0))
        cached = int((self.usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        reasoning = int((self.usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
        usage = Usage(prompt_tokens=int(self.usage.get("prompt_tokens", 0)), completion_tokens=done,
                      cached_tokens=cached, reasoning_tokens=reasoning, ttft_s=ttft, total_s=total,
                      decode_tokens_per_s=done / (total - ttft) if done and total > ttft else 0.0)
        finish = self.finish if self.finish in ("stop", "length", "tool_calls", "cancelled") else "stop"
        yield Chunk("done", finish_reason="tool_calls" if self.calls and finish != "cancelled" else finish,
                    usage=usage, stop_sequence=self.stop_sequence if finish == "stop" and not self.calls else None)


def _sampling(s: Sampling, chat: bool) -> dict:
    """The standard OpenAI sampling fields; llama.cpp-only knobs (top_k, min_p...) stay home.
    Log-probabilities: ``logprobs``/``top_logprobs`` for chat, ``logprobs: k`` for completions."""
    out: dict[str, Any] = {"temperature": s.temperature, "top_p": s.top_p}
    optional = {"max_tokens": s.max_tokens, "seed": s.seed, "stop": s.stop or None,
                "frequency_penalty": s.frequency_penalty or None, "presence_penalty": s.presence_penalty or None}
    if s.logprobs is not None and chat:
        optional.update(logprobs=True, top_logprobs=s.logprobs)
    elif s.logprobs is not None:
        optional["logprobs"] = s.logprobs
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def _tool_choice(choice: str | dict) -> str | dict:
    """The engine's ``{"name": ...}`` (or an OpenAI-shaped choice, as ``fireside chat --tool-choice`` and the
    tool loop pass it) as OpenAI's named-function choice."""
    if not isinstance(choice, dict):
        return choice
    return {"type": "function", "function": {"name": (choice.get("function") or choice)["name"]}}


def _json_or_text(r: httpx.Response) -> Any:
    try:
        return r.json()
    except ValueError:
        return r.text[:300]


def _message(body: Any) -> str:
    err = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(err, dict):
        err = err.get("message", err)
    return str(err)[:400] or "no detail"
