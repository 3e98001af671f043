"""The runtime: loads local models into runner processes and serves chat, completion and embedding requests.

One ``Runtime`` lives in the app process (or in ``fireside serve``), inside the ``Engine``
(``engine/facade.py``), which hands it every id that is not a remote engine's. The chat window, the
CLI and the HTTP server are peers that call it from their own threads. Each loaded model has one
runner; a request for a model that is not loaded loads it first (just in time; the runner is started by
``loading.py``), a model idle past its time-to-live is unloaded, a runner that dies turns into a clear
error for the requests it held and the next request starts a fresh one. It knows nothing of remote engines.

Threading: every public method may be called from any thread. ``chat`` and ``complete`` return
generators that block between chunks; run them off the GUI thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from ..errors import ContextOverflow, GrammarDeadEnd, NoVision, RunnerCrashed, RuntimeFailure
from ..models import LoadOptions
from ..prompts import LibraryProjectors, mark_images, place_images
from ..protocol import Segments
from ..settings import Settings
from ..structured import (
    StreamParser,
    check_reply,
    checked,
    expected_schema,
    forced_tool_names,
    grammar_for,
    no_call_grammar,
    prompt_opens_reasoning,
)
from ..types import ChatRequest, Chunk, CompletionRequest, LoadedModel, Usage
from . import attention, healing
from .arrivals import Arrivals, Ticket
from .loading import Loader, ProgressFn, Slot, cache_config, note_threads

log = logging.getLogger(__name__)
Resolver = Callable[[str], Path]
ProjectorFinder = Callable[[str, Path], "Path | None"]  # (model id, model file) -> its vision projector


class Runtime:
    def __init__(self, settings: Settings, resolver: Resolver | None = None, *, max_queue: int = 16,
                 idle_ttl_s: float | None = None, runner_command: list[str] | None = None,
                 load_defaults: LoadOptions | None = None, projectors: ProjectorFinder | None = None,
                 calibrate: bool = False):
        from ..library import resolve_model

        self.settings = settings
        self.resolver = resolver or (lambda ref: resolve_model(ref, settings))
        self.max_queue = max_queue
        self.idle_ttl_s = settings.idle_ttl_s if idle_ttl_s is None else idle_ttl_s
        self.runner_command = runner_command
        self.load_defaults = load_defaults or LoadOptions()  # for models loaded without options (JIT)
        self.projectors = projectors or LibraryProjectors(settings)
        self.workarounds = healing.Workarounds(settings.data_dir / "workarounds.json")
        self.attention = attention.Choices(settings.data_dir / "attention.json")
        self.calibrate = calibrate  # measure attention in the background after a first load (attention.py)
        self.arrivals = Arrivals()  # requests a server is preparing for the runners (arrivals.py)
        self._lenders = None  # paired devices that lend memory to a load (rpc/lenders.py), on first use
        self._slots: dict[str, Slot] = {}
        self._options: dict[str, LoadOptions] = {}  # remembered per model, reused after a crash or unload
        self._lock = threading.RLock()
        self._load_locks: dict[str, threading.Lock] = {}
        self._closed = threading.Event()
        self._loader = Loader(self)  # starts each model's runner, and keeps the cores' budget (loading.py)
        self._reaper = threading.Thread(target=self._reap_idle, name="fireside-idle-reaper", daemon=True)
        self._reaper.start()

    # --- loading ---------------------------------------------------------------------------------
    def load(self, model_id: str, options: LoadOptions | None = None, *, on_progress: ProgressFn | None = None,
             cancel: threading.Event | None = None, ttl_s: float | None = None, embedding: bool = False) -> LoadedModel:
        """Load ``model_id`` (a no-op if it is loaded with the same options). Blocks until loaded."""
        key = self._key(model_id, embedding)
        with self._lock:
            lock = self._load_locks.setdefault(key, threading.Lock())
        with lock:
            slot = self._slots.get(key)
            if slot and slot.client.alive and (options is None or options == slot.options):
                return slot.loaded
            if slot:
                self._drop(key)
            opts = options or self._options.get(key) or self.load_defaults
            slot = self._loader.start(model_id, opts, on_progress, cancel, ttl_s, embedding)
            with self._lock:
                self._slots[key] = slot
                self._options[key] = opts
            return slot.loaded

    def apply_prompt_cache(self) -> None:
        """Tell every loaded model the settings' prompt cache choices (on/off, cap) now, not at its next
        load. Blocks while a runner finishes its queued cache writes; call it off the GUI thread."""
        with self._lock:
            slots = [s for s in self._slots.values() if not s.loaded.embedding and s.client.alive]
        for slot in slots:
            try:
                slot.client.request("prompt_cache", kvcache=cache_config(self.settings))
            except RuntimeFailure as exc:  # a runner that died meanwhile is started afresh by its next request
                log.warning("could not update the prompt cache of %s: %s", slot.model_id, exc)

    def unload(self, model_id: str, *, only_embedding: bool = False) -> bool:
        """Stop the model's runners (with ``only_embedding``, only the copy loaded to embed, as for the
        documents' embedder); their memory goes back. Returns whether anything was loaded."""
        wanted = (self._key(model_id, True),) if only_embedding else (model_id, self._key(model_id, True))
        with self._lock:
            keys = [k for k in self._slots if k in wanted]
        for key in keys:  # outside the lock: stopping a runner takes a while, and loaded() must not wait
            self._drop(key)
        return bool(keys)

    def _drop(self, key: str) -> None:
        with self._lock:
            slot = self._slots.pop(key, None)
        if slot:
            if self._loader.budget is not None:
                self._loader.budget.forget(slot.client)
            slot.client.close()

    def loaded(self) -> list[LoadedModel]:
        with self._lock:
            return [s.loaded for s in self._slots.values() if s.client.alive]

    def is_loaded(self, model_id: str) -> bool:
        with self._lock:
            slot = self._slots.get(model_id)
            return bool(slot and slot.client.alive)

    def ttl(self, model_id: str, ttl_s: float | None = None) -> float | None:
        """A loaded model's idle time-to-live in seconds (0: never unloaded), set to ``ttl_s`` first
        when given (which restarts its idle clock, as Ollama's keep_alive does); None when the model
        is not loaded."""
        with self._lock:
            slot = self._slots.get(model_id)
            if slot is not None and ttl_s is not None:
                slot.ttl_s, slot.loaded.last_used = ttl_s, time.time()
            return None if slot is None else slot.ttl_s

    @staticmethod
    def _key(model_id: str, embedding: bool) -> str:
        return f"{model_id}#embedding" if embedding else model_id

    def _slot(self, model_id: str, embedding: bool = False, ttl_s: float | None = None,
              arrival: Ticket | None = None) -> Slot:
        key = self._key(model_id, embedding)
        with self._lock:
            slot = self._slots.get(key)
        if slot is None or not slot.client.alive:
            if arrival is not None:
                arrival.hand_in()  # a load takes seconds: no runner waits for this request meanwhile
            self.load(model_id, embedding=embedding, ttl_s=ttl_s)
            with self._lock:
                slot = self._slots[key]
        if ttl_s is not None:
            slot.ttl_s = ttl_s
        return slot

    # --- requests --------------------------------------------------------------------------------
    def render_prompt(self, model_id: str, request: ChatRequest) -> str:
        return _text_of(self._render(self._slot(model_id), request)[0])

    def _render(self, slot: Slot, request: ChatRequest) -> tuple[Segments, list | None]:
        """The prompt for ``request`` as segments (markup, and message contents that are plain text;
        see ``tokens.py``), with its images between them (``images.py``), and the tools the reply may call.
        With tool_choice "none" the tools stay in the prompt (as OpenAI keeps them: switching between "auto"
        and "none" keeps the prompt, and its prefix cache, the same) and none may be called
        (``no_call_grammar``)."""
        variables = dict(request.template_vars)
        if request.enable_thinking is not None:  # None: the template keeps its own default
            variables["enable_thinking"] = request.enable_thinking
        messages, pictures, nonce = mark_images(request.messages)
        if pictures and not slot.loaded.vision:
            raise NoVision(self.no_vision_message(slot.model_id))
        segments = slot.template.render_segments(messages, tools=request.tools, variables=variables)
        segments = place_images(segments, pictures, nonce) if pictures else segments
        return segments, request.tools if request.tool_choice != "none" else None

    def no_vision_message(self, model_id: str) -> str:
        """Why ``model_id`` cannot take an image, naming the library's models that can."""
        names = self.vision_models()
        can = (f"; models in the library that can: {', '.join(names[:5])}" if names
               else "; no model in the library can (pull one with its mmproj projector, e.g. SmolVLM)")
        return f"{model_id} cannot see images: it reads text only (no vision projector is paired with it){can}"

    def vision_models(self) -> list[str]:
        """The ids of the library's models that have a vision projector (``projectors`` finds them)."""
        finder = getattr(self.projectors, "vision_models", None)
        return finder() if finder else []

    def chat(self, model_id: str, request: ChatRequest, cancel: threading.Event | None = None,
             ttl_s: float | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        """Stream a chat reply. Loads the model first if needed. Runs on the caller's thread. ``arrival``:
        the server's ticket for the request (``arrivals.py``), handed in as it goes to the runner."""
        grammar = checked(grammar_for(request))  # refused here, before a load and away from the runner
        slot = self._slot(model_id, ttl_s=ttl_s, arrival=arrival)
        if request.prediction:  # a reply fits the context, and so must the text it is predicted to repeat
            slot.bounded(request.prediction, "the prediction")
        prompt, tools = self._render(slot, request)
        forced = bool(forced_tool_names(request)) if tools else False
        # a template that opens <think> at the generation prompt starts the reply in reasoning, unless a
        # grammar holds the reply to JSON from its first token (then there is no reasoning to close)
        holds_json = grammar is not None and grammar != no_call_grammar()
        opened = None if holds_json else prompt_opens_reasoning(_text_of(prompt))
        parser = StreamParser(tools=bool(tools), reasoning=request.reasoning, forced_tool=forced, opened=opened,
                              verbatim=holds_json and not tools)
        made_calls, logprobs, reasoning_tokens = False, [], 0
        schema, written = (expected_schema(request) if holds_json else None), []
        drafting = {k: v for k, v in (("prediction", request.prediction), ("drafts", request.drafts)) if v is not None}
        for event in self._generate(slot, prompt, request.sampling, grammar, cancel, request.cache_tag, drafting,
                                    arrival):
            if event.kind == "text":
                written.append(event.text)
                reasoning_tokens += event.tokens if parser.thinking else 0
                logprobs += event.logprobs or []
                yield from _carry_logprobs(parser.feed(event.text), logprobs)
                continue
            for chunk in _carry_logprobs(parser.finish(), logprobs):
                made_calls = made_calls or chunk.kind == "tool_calls"
                yield chunk
            if schema is not None and event.finish_reason == "stop":  # a cut reply says "length" already
                check_reply(schema, "".join(written))
            # a call the token limit cut keeps "length", so no client takes its fragment for a whole call
            finish = "tool_calls" if made_calls and event.finish_reason == "stop" else event.finish_reason
            usage = replace(event.usage, reasoning_tokens=reasoning_tokens) if event.usage else None
            yield replace(event, finish_reason=finish, stop_sequence=None if made_calls else event.stop_sequence,
                          usage=usage)

    def complete(self, model_id: str, request: CompletionRequest, cancel: threading.Event | None = None,
                 ttl_s: float | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        """Stream a raw completion of ``request.prompt`` (no chat template)."""
        grammar = checked(request.grammar)
        slot = self._slot(model_id, ttl_s=ttl_s, arrival=arrival)
        drafting = {"drafts": request.drafts} if request.drafts is not None else None
        yield from self._generate(slot, request.prompt, request.sampling, grammar, cancel, None, drafting, arrival)

    def _generate(self, slot: Slot, prompt: str | Segments, sampling, grammar: str | None,
                  cancel: threading.Event | None, cache_tag: str | None = None,
                  drafting: dict | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        slot.bounded(prompt)
        extra = dict(drafting or {})
        if arrival is not None:  # how many other requests the server is still preparing (runner/gather.py's Gather)
            extra["others"] = arrival.hand_in()
        with self._lock:
            slot.busy += 1
            if slot.busy == 1 and self._loader.budget is not None:  # its share goes out before its request
                self._loader.budget.decoding(slot.client, True, slot.options.threads)
        try:
            for msg in slot.client.submit("generate", cancel=cancel or threading.Event(), prompt=prompt,
                                          sampling=sampling, grammar=grammar, add_bos=slot.add_bos,
                                          cache_tag=cache_tag, **extra):
                if msg["type"] == "text":
                    yield Chunk("text", msg["text"], logprobs=msg.get("logprobs"), tokens=msg.get("tokens", 0))
                elif msg["type"] == "done":
                    note_threads(slot.loaded, msg.get("threads"))
                    yield Chunk("done", finish_reason=msg["finish_reason"], usage=Usage(**msg["usage"]),
                                stop_sequence=msg.get("stop_sequence"))
                elif msg["type"] == "error":
                    raise _runner_error(slot, msg)
        except RunnerCrashed:
            self._forget_dead(slot)
            raise
        finally:
            with self._lock:
                slot.busy -= 1
                slot.loaded.last_used = time.time()
                if slot.busy == 0 and self._loader.budget is not None:
                    self._loader.budget.decoding(slot.client, False)

    def _forget_dead(self, slot: Slot) -> None:
        with self._lock:
            key = next((k for k, s in self._slots.items() if s is slot), None)
        if key:
            self._drop(key)

    def tokenize(self, model_id: str, text: str | Segments) -> list[int]:
        """The tokens of ``text``: a string as a raw prompt (special-token text parsed), or segments."""
        slot = self._slot(model_id)
        slot.bounded(text)  # a prompt too long to fit is not counted (count_tokens, truncation: a 400)
        return _ask(slot, "tokenize", text=text, add_bos=slot.add_bos)["tokens"]

    def prompt_cap(self, model_id: str) -> int:
        """The most characters a prompt for ``model_id`` may have (loading it first): more could not fit
        its context, and is refused before it is tokenized (``tokens.py``)."""
        return self._slot(model_id).max_chars

    def chat_tokens(self, model_id: str, request: ChatRequest) -> list[int]:
        """The prompt tokens ``chat`` would send for ``request``, message contents as plain text."""
        return self.tokenize(model_id, self._render(self._slot(model_id), request)[0])

    def count_chat_tokens(self, model_id: str, request: ChatRequest) -> int:
        return len(self.chat_tokens(model_id, request))

    def embed(self, model_id: str, inputs: list[str], truncate: bool = False) -> tuple[list[list[float]], int]:
        """Embedding vectors for ``inputs`` (normalized), and the tokens they took. An input longer than the
        context is refused, or with ``truncate`` embedded from its start (as Ollama's ``truncate`` does, and as
        a document index wants from an embedder with a 512-token context)."""
        slot = self._slot(model_id, embedding=True)
        if truncate and slot.max_chars:
            inputs = [text[:slot.max_chars] for text in inputs]
        for text in inputs:
            slot.bounded(text, "an input")
        result = _ask(slot, "embed", inputs=inputs, truncate=truncate)
        slot.loaded.last_used = time.time()
        return result["vectors"], result["tokens"]

    # --- lifetime --------------------------------------------------------------------------------
    def _reap_idle(self) -> None:
        while not self._closed.wait(1.0):
            now = time.time()
            with self._lock:
                idle = [k for k, s in self._slots.items()
                        if s.ttl_s > 0 and not s.busy and now - s.loaded.last_used > s.ttl_s]
            for key in idle:
                log.info("unloading %s: idle past its time-to-live", key)
                self._drop(key)

    def close(self) -> None:
        """Stop every runner and the idle reaper. Idempotent."""
        self._closed.set()
        with self._lock:
            keys = list(self._slots)
        for key in keys:
            self._drop(key)
        if self._lenders is not None:
            self._lenders.close()

    def lenders(self):
        """The paired devices a load may place layers on (``rpc.Lenders``), made on first use."""
        with self._lock:
            if self._lenders is None:
                from ..devices import DeviceBook
                from ..rpc import Lenders

                self._lenders = Lenders(DeviceBook(self.settings))
            return self._lenders


def _text_of(prompt: Segments) -> str:
    """A rendered prompt's text, its images left out."""
    return "".join(s[0] for s in prompt if isinstance(s, tuple))



def _carry_logprobs(chunks, pending: list) -> Iterator[Chunk]:
    """Hand the tokens' log-probabilities gathered so far to the next text the parser lets out."""
    for chunk in chunks:
        if pending and chunk.kind in ("text", "reasoning"):
            chunk.logprobs = list(pending)
            pending.clear()
        yield chunk


def _ask(slot: Slot, op: str, **payload) -> dict:
    """``slot``'s runner's ``result`` for one request; its error as the engine's error (a prompt too long
    is ``ContextOverflow``)."""
    for msg in slot.client.submit(op, **payload):
        if msg["type"] == "result":
            return msg
        if msg["type"] == "error":
            raise _runner_error(slot, msg)
    raise RuntimeFailure(f"the runner for {slot.model_id} gave no result")


def _runner_error(slot: Slot, msg: dict) -> Exception:
    if msg.get("error") == "ContextOverflow":
        return ContextOverflow(f"{slot.model_id}: {msg['message']}", msg.get("prompt_tokens", 0), msg.get("context", 0))
    if msg.get("error") == "GrammarDeadEnd":
        return GrammarDeadEnd(f"{slot.model_id}: {msg['message']}", msg.get("position", 0))
    return RuntimeFailure(f"{slot.model_id}: {msg.get('message', 'generation failed')}")

