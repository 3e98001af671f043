"""What a benchmark sends its requests to, and how one request is timed.

A target's ``send(prompt, max_tokens)`` makes one streamed request and returns a ``RequestResult``:
when each piece of output arrived (time to first token, the gaps between pieces), how many tokens
the server says it produced (its ``usage``; counted from the stream's events when it sends none), and
why it stopped. ``HttpTarget`` speaks OpenAI's ``/v1/completions`` or ``/v1/chat/completions`` over
SSE with httpx, so it measures Fireside, vLLM, SGLang, llama-server, Ollama or LM Studio alike;
``LocalTarget`` calls a ``Runtime`` in this process, so Fireside's engine is measured without a
server in between. Both are called from many threads at once (one per concurrent request).
``free_port`` and ``wait_until_serving`` start a server to measure: a port to give it, and the wait
until it answers.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

from ..types import ChatRequest, CompletionRequest, Sampling

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# Ask for exactly max_tokens where the server supports it (vLLM, SGLang); others ignore or refuse them.
EXACT_LENGTH = ("ignore_eos", "min_tokens")


def free_port() -> int:
    """A loopback port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(proc: subprocess.Popen, url: str, timeout: float = 180, path: str = "/v1/models") -> None:
    """Wait until the server ``proc`` started answers ``GET url+path`` with 200; ``RuntimeError`` if it
    exits first or has not answered within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}) before it answered")
        try:
            if httpx.get(f"{url}{path}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer within {timeout:.0f} s")
        time.sleep(0.2)


def started(proc: subprocess.Popen, port: int, path: str) -> tuple[subprocess.Popen, str]:
    """``proc`` and its loopback URL once it answers ``path``; a server that dies or never answers is
    killed and ends the bench script with what it said."""
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(proc, url, path=path)
    except RuntimeError as exc:
        proc.kill()
        raise SystemExit(f"{' '.join(map(str, proc.args[:3]))}: {exc}") from None
    return proc, url


@dataclass
class RequestResult:
    """One timed request. Times are seconds from the moment the request was sent."""

    ok: bool
    prompt_tokens: int = 0
    completion_tokens: int = 0
    counted_from_usage: bool = True
    ttft_s: float = 0.0
    latency_s: float = 0.0
    itl_s: list[float] = field(default_factory=list)
    finish_reason: str | None = None
    error: str = ""
    status: int = 0


class Timer:
    """Collects the arrival times of output pieces for one request."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.arrivals: list[float] = []
        self.events = 0

    def piece(self) -> None:
        self.arrivals.append(time.perf_counter() - self.start)
        self.events += 1

    def result(self, prompt_tokens: int, completion_tokens: int | None, finish: str | None) -> RequestResult:
        latency = time.perf_counter() - self.start
        gaps = [b - a for a, b in zip(self.arrivals, self.arrivals[1:])]
        counted = completion_tokens is not None
        return RequestResult(ok=True, prompt_tokens=prompt_tokens,
                             completion_tokens=completion_tokens if counted else self.events,
                             counted_from_usage=counted, ttft_s=self.arrivals[0] if self.arrivals else latency,
                             latency_s=latency, itl_s=gaps, finish_reason=finish)


class HttpTarget:
    """An OpenAI-compatible server at ``base_url`` (with or without a trailing ``/v1``)."""

    def __init__(self, base_url: str, model: str, *, endpoint: str = "completions", api_key: str | None = None,
                 timeout_s: float = 300.0, max_connections: int = 64, exact_length: bool = True,
                 client: httpx.Client | None = None):
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model, self.endpoint, self.exact_length = model, endpoint, exact_length
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = client or httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections))
        self.label = f"{self.base_url}{ENDPOINTS[endpoint]}"

    def body(self, prompt: str, max_tokens: int, seed: int | None = None) -> dict:
        body: dict = {"model": self.model, "stream": True, "stream_options": {"include_usage": True},
                      "max_tokens": max_tokens, "temperature": 0.0}
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if seed is not None:
            body["seed"] = seed
        if self.exact_length:
            body.update(ignore_eos=True, min_tokens=max_tokens)
        return body

    def send(self, prompt: str, max_tokens: int, seed: int | None = None) -> RequestResult:
        timer = Timer()
        try:
            with self.client.stream("POST", self.label, json=self.body(prompt, max_tokens, seed)) as r:
                if r.status_code != 200:
                    return RequestResult(ok=False, status=r.status_code, latency_s=time.perf_counter() - timer.start,
                                         error=f"HTTP {r.status_code}: {_error_text(r.read())}")
                return self._read(r.iter_lines(), timer)
        except (httpx.HTTPError, ValueError) as exc:
            return RequestResult(ok=False, latency_s=time.perf_counter() - timer.start,
                                 error=f"{type(exc).__name__}: {exc}")

    def _read(self, lines: Iterator[str], timer: Timer) -> RequestResult:
        usage: dict = {}
        finish = None
        for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                return RequestResult(ok=False, error=f"error in stream: {_error_text(event)}")
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if choice.get("text") or delta.get("content") or delta.get("reasoning_content"):
                    timer.piece()
                finish = choice.get("finish_reason") or finish
        if not timer.arrivals:
            return RequestResult(ok=False, error="the stream ended without any output")
        return timer.result(usage.get("prompt_tokens", 0), usage.get("completion_tokens"), finish)

    def close(self) -> None:
        self.client.close()


def _error_text(raw: bytes | dict) -> str:
    try:
        body = json.loads(raw) if isinstance(raw, bytes) else raw
    except ValueError:
        return raw[:200].decode("utf-8", "replace")
    err = body.get("error", body) if isinstance(body, dict) else body
    return str(err.get("message", err) if isinstance(err, dict) else err)[:300]


class LocalTarget:
    """Fireside's own runtime, called in this process: the engine's speed without a server in between."""

    def __init__(self, runtime, model: str, *, endpoint: str = "completions"):
        self.runtime, self.model, self.endpoint = runtime, model, endpoint
        self.label = f"local runtime: {model}"

    def send(self, prompt: str, max_tokens: int, seed: int | None = None) -> RequestResult:
        sampling = Sampling(temperature=0.0, seed=seed, max_tokens=max_tokens)
        timer = Timer()
        if self.endpoint == "chat":
            chunks = self.runtime.chat(self.model, ChatRequest([{"role": "user", "content": prompt}], sampling),
                                       cancel=threading.Event())
        else:
            chunks = self.runtime.complete(self.model, CompletionRequest(prompt, sampling), cancel=threading.Event())
        try:
            for chunk in chunks:
                if chunk.kind in ("text", "reasoning") and chunk.text:
                    timer.piece()
                elif chunk.kind == "done":
                    u = chunk.usage
                    return timer.result(u.prompt_tokens if u else 0, u.completion_tokens if u else None,
                                        chunk.finish_reason)
        except Exception as exc:  # a failed request is a figure, not the end of the run
            return RequestResult(ok=False, latency_s=time.perf_counter() - timer.start,
                                 error=f"{type(exc).__name__}: {exc}")
        return RequestResult(ok=False, error="the runtime ended the reply without a done chunk")

    def close(self) -> None:
        pass
