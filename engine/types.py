"""The engine's own request and chunk types: what every client (chat window, CLI, each API dialect)
hands the ``Engine``, and what streams back, whether a local runner or a remote engine answers. Plain
dataclasses, so they pickle across the runner pipe and translate to any dialect's JSON without loss.

A leaf module: it imports nothing from Fireside, so the runtime, the remote engines, the server and
the app all import it and none of them has to import another for its types.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from typing import Any

IMAGE_PART = "image"  # a message content part {"type": "image", "image": Image}


@dataclass
class Sampling:
    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    repeat_last_n: int = 64  # the tokens the penalties look back over (0: none, -1: the whole context)
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    typical_p: float = 1.0  # locally typical sampling (1: off)
    mirostat: int = 0  # 1 or 2: Mirostat (v1, v2) in place of top-k/typical/top-p/min-p, aiming at surprise tau
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    logprobs: int | None = None  # None: no log-probabilities; k (0-20): each token's, with k alternatives
    ignore_eos: bool = False  # never end at an end-of-generation token: run to max_tokens (benchmarks' option)


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as OpenAI sends it
    id: str = ""


@dataclass(frozen=True)
class Image:
    """An image in a chat message, already decoded (``prompts/images.py``'s ``decode_image`` makes one
    from a file's bytes, checked and capped): ``pixels`` are 8-bit RGB, row by row, ``width * height * 3``
    bytes. ``digest`` (SHA-256 of the size and the pixels) is the image's identity: two files that
    decode to the same pixels are the same image to the model and to every cache, whatever their format.
    ``media_type`` is the source file's (``image/png``, ``image/jpeg``, ...), kept for saving and display."""

    pixels: bytes = field(repr=False)
    width: int
    height: int
    media_type: str = "image/png"
    digest: str = ""

    def __post_init__(self) -> None:
        if len(self.pixels) != self.width * self.height * 3:
            raise ValueError(f"{self.width}x{self.height} RGB pixels are {self.width * self.height * 3} bytes, "
                             f"not {len(self.pixels)}")
        if not self.digest:
            object.__setattr__(self, "digest", image_digest(self.pixels, self.width, self.height))

    def part(self) -> dict[str, Any]:
        """This image as a message content part (beside ``{"type": "text", "text": ...}`` parts)."""
        return {"type": IMAGE_PART, "image": self}


def image_digest(pixels: bytes, width: int, height: int) -> str:
    digest = hashlib.sha256(f"{width}x{height}:".encode())
    digest.update(pixels)  # not prefix + pixels: that copied a 48 MB image once more
    return digest.hexdigest()


def images_in(messages: list[dict[str, Any]]) -> list[Image]:
    """Every image in ``messages``, in order."""
    return [p["image"] for m in messages if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == IMAGE_PART]


@dataclass
class ChatRequest:
    """A chat turn to generate. ``messages`` use OpenAI's shape: role, content, tool_calls, tool_call_id.
    A content may be a list of parts: ``{"type": "text", "text": ...}`` and ``Image.part()``."""

    messages: list[dict[str, Any]]
    sampling: Sampling = field(default_factory=Sampling)
    tools: list[dict[str, Any]] | None = None  # OpenAI function tools: {"type": "function", "function": {...}}
    tool_choice: str | dict[str, Any] = "auto"  # "auto", "none", "required" or {"name": ...}
    json_schema: dict[str, Any] | None = None  # constrain the reply to this schema
    json_mode: bool = False  # constrain the reply to some JSON object
    reasoning: bool = True  # split <think> text from the answer
    # the chat template's ``enable_thinking`` (Qwen3's switch): False turns a reasoning template's thinking
    # off, True asks for it, None passes nothing, so each template keeps its own default
    enable_thinking: bool | None = None
    # more variables for the chat template (OpenAI chat's ``chat_template_kwargs``, as vLLM and llama-server
    # read it; ``reasoning_effort`` for gpt-oss's template); JSON values, never the template's own names
    template_vars: dict[str, Any] = field(default_factory=dict)
    # the request field that set the two above (``think``, ``thinking``, ``reasoning_effort``...): a remote
    # engine that refuses them is a 400 naming it
    template_param: str = "chat_template_kwargs"
    cache_tag: str | None = None  # files this turn's saved KV state under a name (the app: its chat), to delete later
    # text the reply is expected to repeat, such as a file being edited (OpenAI's Predicted Outputs): the
    # source of speculative decoding's drafts (runner/drafts.py); the reply is the same without it
    prediction: str | None = None
    drafts: bool | None = None  # prompt-lookup drafts for this request (None: as the model was loaded)


@dataclass
class CompletionRequest:
    """Raw text completion: the prompt goes to the model as is, with no chat template."""

    prompt: str
    sampling: Sampling = field(default_factory=Sampling)
    grammar: str | None = None
    drafts: bool | None = None  # prompt-lookup drafts for this request (None: as the model was loaded)


@dataclass
class TokenLogprob:
    """One sampled token's log-probability under the model, and the ``top`` most likely tokens at its
    step as (text, log-probability) pairs, most likely first. Taken from the raw logits, before
    penalties, grammar and temperature, as llama-server reports them."""

    token: str
    logprob: float
    top: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens reused from a slot's cache (an earlier turn or a shared prefix)
    restored_tokens: int = 0  # of those, the ones loaded from the prompt cache on disk (runner/kvstate.py)
    reasoning_tokens: int = 0  # of completion_tokens, the ones decoded inside the reply's reasoning
    ttft_s: float = 0.0
    decode_tokens_per_s: float = 0.0
    prompt_tokens_per_s: float = 0.0
    total_s: float = 0.0
    draft_tokens: int = 0  # tokens drafted and verified by speculative decoding (runner/drafts.py)
    accepted_draft_tokens: int = 0  # of those, the ones the reply kept
    accepted_prediction_tokens: int = 0  # with a prediction (OpenAI's Predicted Outputs): drafts kept
    rejected_prediction_tokens: int = 0  # and drafts refused (decoded, then dropped)

    @property
    def evaluated_prompt_tokens(self) -> int:
        """Prompt tokens actually evaluated (Ollama's prompt_eval_count, Anthropic's input_tokens)."""
        return self.prompt_tokens - self.cached_tokens

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Chunk:
    """One piece of a streamed reply.

    kind: ``text`` (answer text), ``reasoning`` (thinking text), ``tool_call_delta`` (a tool call as it
    streams: first ``ToolCall(name, "", id)``, then ``ToolCall("", fragment, "")`` for each piece of its
    arguments, call number ``index``), ``tool_calls`` (the parsed calls, whole, once the model has
    finished them; after their deltas) or ``done`` (the last chunk: ``finish_reason`` and ``usage``).
    finish_reason: ``stop``, ``length``, ``tool_calls`` or ``cancelled``; ``stop_sequence`` is the stop
    string that ended the reply, if one did.
    """

    kind: str
    text: str = ""
    tool_calls: list[ToolCall] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    logprobs: list[TokenLogprob] | None = None  # for ``text`` chunks, when the request's sampling asked
    index: int = 0  # for ``tool_call_delta``: which call of the reply
    stop_sequence: str | None = None  # for ``done``
    tokens: int = 0  # for ``text`` straight from a runner: how many generated tokens the text came from


@dataclass
class LoadProgress:
    model_id: str
    fraction: float
    message: str = ""


@dataclass
class LoadedModel:
    """A model the runtime holds in a runner: what it was loaded with and what that cost."""

    model_id: str
    path: str
    pid: int
    n_ctx: int
    n_gpu_layers: int
    n_layers: int
    verdict: str
    planned_ram_bytes: int
    planned_gpu_bytes: int
    rss_bytes: int = 0
    loaded_at: float = 0.0
    last_used: float = 0.0
    embedding: bool = False
    notes: list[str] = field(default_factory=list)
    reported_bytes: dict[str, int] = field(default_factory=dict)  # what llama.cpp said it allocated
    reported_buffers: dict[str, float] = field(default_factory=dict)  # MiB per "buffer kind" ("Vulkan0 model")
    calibration: dict[str, dict[str, float]] = field(default_factory=dict)  # planned vs reported
    warnings: list[str] = field(default_factory=list)  # what the user should be told: a healed or shrunk load
    parallel: int = 1  # slots: requests decoded together, each with a context of n_ctx tokens
    threads: int = 0  # decode threads in use (as of its last reply; runner/threads.py chooses them)
    prompt_threads: int = 0  # threads evaluating prompts
    thread_share: int = 0  # the most it may use now: its share of the engine's cores (threadbudget.py)
    threads_fixed: bool = False  # the user chose the count (--threads): it never moves
    vision: bool = False  # loaded with a vision projector: its chats may hold images
    draft: str = ""  # the draft model loaded beside it (speculative decoding), as the load options named it

    def threads_share_label(self) -> str:
        """The threads it may use, in words, steady between replies ("2 threads", "2 threads (fixed)"): the
        status bar's, where ``threads_label``'s "1 of 2" and "2" took turns as the runner adapted."""
        if not self.threads:
            return ""
        most = self.threads if self.threads_fixed else max(self.thread_share, self.threads)
        return f"{most} thread{'s' if most > 1 else ''}" + (" (fixed)" if self.threads_fixed else "")

    def threads_label(self) -> str:
        """The threads in use, in words: "2 threads (fixed)", "1 of 2 threads", "" before any are known."""
        if not self.threads:
            return ""
        if self.threads_fixed:
            return f"{self.threads} thread{'s' if self.threads > 1 else ''} (fixed)"
        most = max(self.thread_share, self.threads)
        return f"{self.threads} of {most} threads" if most > self.threads else \
            f"{self.threads} thread{'s' if self.threads > 1 else ''}"
