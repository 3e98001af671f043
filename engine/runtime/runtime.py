"""The runtime: loads local models into runner processes and serves chat, completion and embedding requests.

One ``Runtime`` lives in the app process (or in ``fireside serve``), inside the ``Engine``
(``engine/facade.py``), which hands it every id that is not a remote engine's. The chat window, the
CLI and the HTTP server are peers that call it from their own threads. Each loaded model has one
runner; a request for a model that is not loaded loads it first (just in time), a model idle past its
time-to-live is unloaded, a runner that dies turns into a clear error for the requests it held and
the next request starts a fresh one. It knows nothing of remote engines.

Threading: every public method may be called from any thread. ``chat`` and ``complete`` return
generators that block between chunks; run them off the GUI thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import (
    ContextOverflow,
    EmbedsOnly,
    GrammarDeadEnd,
    InvalidModelFile,
    LoadCancelled,
    ModelNotFound,
    ModelTooLarge,
    NoVision,
    RunnerCrashed,
    RuntimeFailure,
)
from ..models import (
    FitPlan,
    LoadOptions,
    ModelInfo,
    hardware,
    inspect_file,
    kv_fits,
    plan_fit,
    read_projector,
    with_draft,
    with_projector,
)
from ..prompts import ChatTemplate, LibraryProjectors, mark_images, place_images
from ..protocol import Segments, max_prompt_chars, prompt_chars
from ..runner import CacheConfig
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
from ..types import ChatRequest, Chunk, CompletionRequest, LoadedModel, LoadProgress, Usage
from . import attention, healing
from .arrivals import Arrivals, Ticket
from .client import RunnerClient
from .embedders import embedder_facts, embedding_kwargs
from .threadbudget import ThreadBudget

log = logging.getLogger(__name__)
Resolver = Callable[[str], Path]
ProjectorFinder = Callable[[str, Path], "Path | None"]  # (model id, model file) -> its vision projector
ProgressFn = Callable[[LoadProgress], None]


@dataclass
class _Slot:
    """A loaded model: its runner and what it was loaded with."""

    model_id: str
    info: ModelInfo
    plan: FitPlan
    options: LoadOptions
    client: RunnerClient
    template: ChatTemplate
    add_bos: bool
    loaded: LoadedModel
    ttl_s: float
    busy: int = 0
    notes: list[str] = field(default_factory=list)
    max_chars: int = 0  # the longest prompt, in characters, that could fit the context (tokens.py); 0: no cap

    def bounded(self, prompt: str | Segments, what: str = "the prompt") -> None:
        """Refuse ``prompt`` here, before anything tokenizes it, when it is too long to fit the context
        whatever it says: a 4 MB prompt would otherwise cost the runner seconds to find that out."""
        chars = prompt_chars(prompt)
        if self.max_chars and chars > self.max_chars:
            n_ctx = self.loaded.n_ctx
            raise ContextOverflow(f"{self.model_id}: {what} is {chars:,} characters, and a {n_ctx:,}-token context "
                                  f"holds at most {self.max_chars:,} characters of this model's text", 0, n_ctx)


LOADING_MAX = 0.99  # the most a load reports before its warm-up has passed


@dataclass(frozen=True)
class _Spawn:
    """What one load starts runners for, whatever configuration each try uses."""

    model_id: str
    path: Path
    embedding: bool
    on_progress: ProgressFn | None
    cancel: threading.Event | None
    fixed_threads: int | None = None  # the user's --threads: kept as chosen (runner/threads.py)
    mmproj: str | None = None
    draft: dict | None = None  # the draft model the runner loads beside it: {"path", "name", "n_gpu_layers"}
    pooling: int = 1  # an embedding load's llama.cpp pooling type: -1 (the GGUF's own) when it names one, else mean
    positions: int | None = None  # an encoder's (BERT's) trained positions: its context cannot go past them


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
        self._slots: dict[str, _Slot] = {}
        self._options: dict[str, LoadOptions] = {}  # remembered per model, reused after a crash or unload
        self._lock = threading.RLock()
        self._load_locks: dict[str, threading.Lock] = {}
        self._closed = threading.Event()
        self._budget: ThreadBudget | None = None  # the cores, split between the runners decoding (made at the first load)
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
            slot = self._start(model_id, opts, on_progress, cancel, ttl_s, embedding)
            with self._lock:
                self._slots[key] = slot
                self._options[key] = opts
            return slot.loaded

    def _plan(self, model_id: str, path: Path, info, opts: LoadOptions, embedding: bool):
        """The fit plan for a load, the vision projector's and draft model's memory counted, the
        projector's path and the draft model's path; raises ``ModelTooLarge`` for a load llama.cpp would
        refuse or that does not fit, ``ModelNotFound`` for a draft model that is not there."""
        if opts.gpu_budget_gib is None and self.settings.gpu_budget_gib is not None:
            opts = replace(opts, gpu_budget_gib=self.settings.gpu_budget_gib)
        plan = plan_fit(info, hardware.detect(refresh=True), opts)  # free memory now, other models included
        mmproj = None if embedding else (opts.mmproj or self.projectors(model_id, path))
        projector = read_projector(mmproj) if mmproj else None
        if projector is not None:
            plan = with_projector(plan, projector.size, projector.compute_bytes)
        draft = None
        if opts.draft and not embedding:
            try:
                draft = Path(self.resolver(opts.draft))
                plan = with_draft(plan, inspect_file(draft))
            except (ModelNotFound, OSError, InvalidModelFile) as exc:
                raise ModelNotFound(f"the draft model for {model_id} cannot be used: {exc}") from None
        if plan.refusal:  # llama.cpp would refuse these options at any size: do not try, say why
            raise ModelTooLarge(f"{model_id} will not load: {plan.refusal}")
        if not plan.fits and opts.n_gpu_layers is None:
            raise ModelTooLarge(f"{model_id} needs about {plan.shortfall_bytes / 2**30:.1f} GiB more memory than "
                                f"this machine has free at a {plan.context:,}-token context; try a smaller context "
                                f"(largest that fits: {plan.max_context:,}) or a smaller quantization")
        return plan, mmproj, draft

    def _start(self, model_id: str, opts: LoadOptions, on_progress: ProgressFn | None,
               cancel: threading.Event | None, ttl_s: float | None, embedding: bool) -> _Slot:
        path = self.resolver(model_id)
        try:
            info = inspect_file(path)
        except (OSError, InvalidModelFile):
            if Path(path).exists():
                raise
            # removed since the library named it: gone (a 404), as an unknown name is
            raise ModelNotFound(f"{model_id} is no longer in the models folder") from None
        if info.embeds_only and not embedding:
            raise EmbedsOnly(f"{model_id} is an embedding model: it turns text into vectors for search "
                             "(the embeddings API, or the documents' embedder in Settings) and cannot write replies")
        template = ChatTemplate(info.chat_template, info.bos_token, info.eos_token)
        plan, mmproj, draft = self._plan(model_id, Path(path), info, opts, embedding)
        plan, measure = self._attention(model_id, path, info, opts, plan, embedding)
        notes = list(plan.notes)
        warnings: list[str] = []
        spawn = _Spawn(model_id, path, embedding, _never_back(on_progress), cancel, opts.threads,
                       str(mmproj) if mmproj else None,
                       {"path": str(draft), "name": opts.draft, "n_gpu_layers": -1 if plan.draft_gpu else 0,
                        "kv_type": plan.draft_kv}
                       if draft else None, *embedder_facts(info))
        if self._budget is None:
            self._budget = ThreadBudget(hardware.detect().cpu_cores)  # what a load takes when not told
        try:
            client, result, plan = self._spawn_healing(spawn, plan, warnings)
        except (RuntimeFailure, RunnerCrashed) as first:
            if isinstance(first, LoadCancelled) or (cancel and cancel.is_set()):
                raise LoadCancelled(f"loading {model_id} was cancelled") from None
            smaller, change = _fallback(plan)
            if smaller is None or (isinstance(first, RunnerCrashed) and healing.is_crash(first.signal)):
                raise
            log.warning("load of %s failed (%s); retrying with %s", model_id, first, change)
            warnings.append(f"The first load of {model_id} failed ({first}); it loaded with {change} instead.")
            client, result, plan = self._spawn_healing(spawn, smaller, warnings)
        if result.get("vision_error"):
            warnings.append(f"{model_id} loaded for text only: {result['vision_error']}")
        if result.get("draft_error"):
            warnings.append(f"{model_id} loaded without a draft model: {result['draft_error']}")
        notes += warnings
        gpu_layers = min(plan.n_gpu_layers, info.block_count + 1)
        reported = reported_bytes(result.get("buffers", {}))
        loaded = LoadedModel(
            model_id=model_id, path=str(path), pid=client.pid, n_ctx=result["n_ctx"], n_gpu_layers=gpu_layers,
            n_layers=info.block_count, verdict=plan.verdict, planned_ram_bytes=plan.ram.total_bytes,
            planned_gpu_bytes=plan.gpu_bytes, rss_bytes=result.get("rss", 0), loaded_at=time.time(),
            last_used=time.time(), embedding=embedding, notes=notes, reported_bytes=reported,
            reported_buffers=dict(result.get("buffers", {})),
            calibration=plan.compare(reported) if reported else {}, warnings=warnings,
            parallel=result.get("n_seq", plan.parallel), vision=bool(result.get("vision")),
            draft=result.get("draft") or "",
        )
        _note_threads(loaded, result.get("threads"))
        if measure is not None:
            threading.Thread(target=measure, name="fireside-attention-calibration", daemon=True).start()
        log.info("loaded %s in runner %d (%s, ctx %d, %d slots)", model_id, client.pid, plan.verdict, loaded.n_ctx,
                 loaded.parallel)
        return _Slot(model_id, info, plan, opts, client, template, result.get("add_bos", False), loaded,
                     self.idle_ttl_s if ttl_s is None else ttl_s, notes=notes,
                     max_chars=max_prompt_chars(loaded.n_ctx, result.get("longest_piece", 0)))

    def _attention(self, model_id: str, path, info: ModelInfo, opts: LoadOptions, plan: FitPlan,
                   embedding: bool) -> tuple[FitPlan, Callable[[], None] | None]:
        """The plan with the attention this machine measured fastest for the model's architecture
        (``attention.py``), when the load left the choice to Fireside (KV type auto, flash attention
        unset, on the CPU); and, when nothing is remembered yet, the calibration to run after the load."""
        if embedding or opts.kv_type != "auto" or opts.flash_attn is not None or plan.n_gpu_layers > 0:
            return plan, None
        threads = opts.threads or hardware.detect().cpu_cores
        k = attention.model_key(hardware.detect(), info, threads)
        entry = self.attention.get(k)
        if entry is None:
            if not self.calibrate:
                return plan, None

            def measure() -> None:
                try:
                    self.attention.remember(k, attention.calibrate(str(path), threads), model_id)
                    log.info("attention calibrated for %s: %s", model_id, attention.describe(self.attention.get(k)))
                except Exception as exc:  # a crash or a timeout: the default stays, measured again next time
                    log.warning("attention calibration for %s failed: %s", model_id, exc)
            return plan, measure
        kv, flash = attention.KINDS[entry["kind"]]
        if kv != "f16" and not kv_fits(info, kv):
            return plan, None
        note = f"attention: {attention.describe(entry)}, measured on this machine"
        return replace(plan, kv_type=kv, flash_attn=flash, notes=[*plan.notes, note]), None

    def _spawn_healing(self, spawn: _Spawn, plan: FitPlan, warnings: list[str]) -> tuple[RunnerClient, dict, FitPlan]:
        """Start a runner for ``plan``; when llama.cpp crashes it (a signal during load or warm-up), walk
        the safety ladder (``healing.py``) until a configuration survives, and remember that one."""
        key = healing.machine_key(hardware.detect(), spawn.path)
        remembered = rungs = self.workarounds.get(key)
        if rungs:
            log.info("loading %s with the remembered workaround for this machine: %s", spawn.model_id,
                     healing.describe(rungs))
        crashed: RunnerCrashed | None = None
        while True:
            try:
                client, result = self._spawn(spawn, plan, rungs)
                break
            except RunnerCrashed as crash:
                safer = healing.next_rungs(plan, rungs)
                if not healing.is_crash(crash.signal) or (spawn.cancel and spawn.cancel.is_set()) or safer is None:
                    if crashed is not None:
                        raise RunnerCrashed(f"{crash} (also with {healing.describe(rungs)})", crash.signal) from None
                    raise
                log.warning("the runner for %s crashed (%s) with %s; retrying with %s", spawn.model_id,
                            healing.signal_name(crash.signal), healing.describe(rungs) if rungs else "the full "
                            "configuration", healing.describe(safer))
                if spawn.on_progress:
                    spawn.on_progress(LoadProgress(spawn.model_id, 0.0, f"llama.cpp crashed; retrying with "
                                                                        f"{healing.describe(safer)}"))
                crashed, rungs = crash, safer
        if crashed is not None:
            self.workarounds.remember(key, rungs, spawn.model_id, f"crashed by {healing.signal_name(crashed.signal)}")
            warnings.append(f"llama.cpp crashed ({healing.signal_name(crashed.signal)}) while loading "
                            f"{spawn.model_id}, so Fireside loaded it with {healing.describe(rungs)}; this is "
                            "remembered for this machine (see Settings or `fireside hw`).")
        elif remembered:
            warnings.append(f"{spawn.model_id} loaded with {healing.describe(rungs)}, remembered after a llama.cpp "
                            "crash on this machine (clear it in Settings or with `fireside hw --clear-workarounds`).")
        return client, result, healing.apply(plan, rungs)

    def _spawn(self, spawn: _Spawn, plan: FitPlan, rungs: tuple[str, ...] = ()) -> tuple[RunnerClient, dict]:
        model_id, path, embedding = spawn.model_id, spawn.path, spawn.embedding
        on_progress, cancel = spawn.on_progress, spawn.cancel
        client = RunnerClient(model_id, self.settings.cache_dir / "logs", self.max_queue, self.runner_command)
        kwargs = healing.load_kwargs(plan, rungs)
        if embedding:
            kwargs.update(embedding_kwargs(spawn.pooling, spawn.positions, kwargs))
        try:
            for msg in client.submit("load", cancel=cancel, path=str(path), kwargs=kwargs, mmproj=spawn.mmproj,
                                     draft=spawn.draft,
                                     threads_fixed=spawn.fixed_threads is not None,
                                     kvcache=None if embedding else self._cache_config()):
                if msg["type"] == "progress" and on_progress:  # 1.0 only once loaded and warmed up
                    on_progress(LoadProgress(model_id, min(msg["fraction"], LOADING_MAX)))
                elif msg["type"] == "error":
                    if msg.get("error") == "LoadCancelled":
                        raise LoadCancelled(f"loading {model_id} was cancelled")
                    raise RuntimeFailure(f"could not load {model_id}: {msg['message']}")
                elif msg["type"] == "result":
                    if on_progress:
                        on_progress(LoadProgress(model_id, 1.0, "loaded"))
                    return client, msg
            raise RuntimeFailure(f"the runner for {model_id} ended the load without an answer")
        except BaseException:
            client.close()
            raise

    def _cache_config(self) -> dict | None:
        """What a runner is told about the prompt cache on disk (``kvcache.py``, ``runner/kvstate.py``); None when it is off."""
        s = self.settings
        if not s.prompt_cache:
            return None
        return CacheConfig(str(s.prompt_cache_dir), s.prompt_cache_cap_bytes).to_dict()

    def apply_prompt_cache(self) -> None:
        """Tell every loaded model the settings' prompt cache choices (on/off, cap) now, not at its next
        load. Blocks while a runner finishes its queued cache writes; call it off the GUI thread."""
        with self._lock:
            slots = [s for s in self._slots.values() if not s.loaded.embedding and s.client.alive]
        for slot in slots:
            try:
                slot.client.request("prompt_cache", kvcache=self._cache_config())
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
            if self._budget is not None:
                self._budget.forget(slot.client)
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
              arrival: Ticket | None = None) -> _Slot:
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

    def _render(self, slot: _Slot, request: ChatRequest) -> tuple[Segments, list | None]:
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

    def _generate(self, slot: _Slot, prompt: str | Segments, sampling, grammar: str | None,
                  cancel: threading.Event | None, cache_tag: str | None = None,
                  drafting: dict | None = None, arrival: Ticket | None = None) -> Iterator[Chunk]:
        slot.bounded(prompt)
        extra = dict(drafting or {})
        if arrival is not None:  # how many other requests the server is still preparing (runner/batch.py's Gather)
            extra["others"] = arrival.hand_in()
        with self._lock:
            slot.busy += 1
            if slot.busy == 1 and self._budget is not None:  # its share goes out before its request
                self._budget.decoding(slot.client, True, slot.options.threads)
        try:
            for msg in slot.client.submit("generate", cancel=cancel or threading.Event(), prompt=prompt,
                                          sampling=sampling, grammar=grammar, add_bos=slot.add_bos,
                                          cache_tag=cache_tag, **extra):
                if msg["type"] == "text":
                    yield Chunk("text", msg["text"], logprobs=msg.get("logprobs"), tokens=msg.get("tokens", 0))
                elif msg["type"] == "done":
                    _note_threads(slot.loaded, msg.get("threads"))
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
                if slot.busy == 0 and self._budget is not None:
                    self._budget.decoding(slot.client, False)

    def _forget_dead(self, slot: _Slot) -> None:
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


def _text_of(prompt: Segments) -> str:
    """A rendered prompt's text, its images left out."""
    return "".join(s[0] for s in prompt if isinstance(s, tuple))


def _never_back(on_progress: ProgressFn | None) -> ProgressFn | None:
    """``on_progress`` with fractions that never go down: a load retried after a crash (or with a
    smaller plan) keeps the bar where it was, with a message saying why it waits, instead of
    emptying it (the retry reads the file from the page cache, so it catches up fast)."""
    if on_progress is None:
        return None
    best = [0.0]

    def report(p: LoadProgress) -> None:
        best[0] = max(best[0], p.fraction)
        on_progress(replace(p, fraction=best[0]))

    return report


def _note_threads(loaded: LoadedModel, threads: dict | None) -> None:
    """Keep what the runner said about its threads (``runner/threads.py``'s ``now``) for ``ps``."""
    if threads:
        loaded.threads, loaded.prompt_threads = threads["decode"], threads["prompt"]
        loaded.thread_share, loaded.threads_fixed = threads["share"], threads["fixed"]


def reported_bytes(buffers: dict[str, float]) -> dict[str, int]:
    """Sum llama.cpp's logged buffer sizes ("CUDA0 KV": 512.0 MiB, ...) into weights, kv and compute."""
    out = {"weights": 0.0, "kv": 0.0, "compute": 0.0}
    for name, mib in buffers.items():
        kind = name.rsplit(" ", 1)[-1]
        key = {"model": "weights", "KV": "kv", "RS": "kv"}.get(kind, "compute")
        out[key] += mib
    return {k: int(v * 1024 * 1024) for k, v in out.items() if v}


def _carry_logprobs(chunks, pending: list) -> Iterator[Chunk]:
    """Hand the tokens' log-probabilities gathered so far to the next text the parser lets out."""
    for chunk in chunks:
        if pending and chunk.kind in ("text", "reasoning"):
            chunk.logprobs = list(pending)
            pending.clear()
        yield chunk


def _ask(slot: _Slot, op: str, **payload) -> dict:
    """``slot``'s runner's ``result`` for one request; its error as the engine's error (a prompt too long
    is ``ContextOverflow``)."""
    for msg in slot.client.submit(op, **payload):
        if msg["type"] == "result":
            return msg
        if msg["type"] == "error":
            raise _runner_error(slot, msg)
    raise RuntimeFailure(f"the runner for {slot.model_id} gave no result")


def _runner_error(slot: _Slot, msg: dict) -> Exception:
    if msg.get("error") == "ContextOverflow":
        return ContextOverflow(f"{slot.model_id}: {msg['message']}", msg.get("prompt_tokens", 0), msg.get("context", 0))
    if msg.get("error") == "GrammarDeadEnd":
        return GrammarDeadEnd(f"{slot.model_id}: {msg['message']}", msg.get("position", 0))
    return RuntimeFailure(f"{slot.model_id}: {msg.get('message', 'generation failed')}")


def _fallback(plan: FitPlan) -> tuple[FitPlan | None, str]:
    """A smaller plan to retry a failed load with, and what changed, in words."""
    if plan.n_gpu_layers > 0:
        fewer = plan.n_gpu_layers // 2
        return replace(plan, n_gpu_layers=fewer), f"{fewer} GPU layers instead of {plan.n_gpu_layers}"
    if plan.context > 2048:
        half = max(2048, plan.context // 2)
        return replace(plan, context=half), f"a {half:,}-token context instead of {plan.context:,}"
    return None, ""
