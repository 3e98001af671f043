"""Starting a model's runner, for the runtime (``runtime.py``): the model file inspected, the fit plan with
its vision projector's and draft model's memory counted, the attention this machine measured fastest
(``attention.py``), the runner spawned and its load's progress reported, the safety ladder walked when
llama.cpp crashes it (``healing.py``) and a failed load tried again with a smaller plan, and what the runner
answered kept as the model's ``Slot``.

Threading: ``Loader.start`` runs on the thread that asked for the load, which holds that model's load lock
(``Runtime.load``); loads of different models may run at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import (
    ContextOverflow,
    DeviceGone,
    EmbedsOnly,
    InvalidModelFile,
    LoadCancelled,
    ModelNotFound,
    ModelTooLarge,
    RunnerCrashed,
    RuntimeFailure,
)
from ..models import (
    FitPlan,
    LoadOptions,
    ModelInfo,
    hardware,
    inspect_file,
    plan_fit,
    read_projector,
    with_draft,
    with_projector,
)
from ..prompts import ChatTemplate
from ..protocol import Segments, max_prompt_chars, prompt_chars
from ..runner import CacheConfig
from ..settings import Settings
from ..types import LoadedModel, LoadProgress
from . import attention, healing
from .client import RunnerClient
from .embedders import embedder_facts, embedding_kwargs
from .threadbudget import ThreadBudget

log = logging.getLogger(__name__)
_GONE = "lent memory: "  # a plan note about a paired device that could not be used, told as a warning
ProgressFn = Callable[[LoadProgress], None]
LOADING_MAX = 0.99  # the most a load reports before its warm-up has passed
CANCEL_KILL_S = 5.0  # a load told to stop that has not answered by then is stuck in llama.cpp: its runner is killed
# before a load across paired devices is tried once more after its runner died: the time a lender takes to see
# the dead runner's tunnel close and end its session (its worker serves one client at a time). Tried within a
# second on a busy machine, the second runner died too (SIGABRT, before its log had a line: by its timing, while
# connecting to the lender) in 2 of 3 runs of the RPC test under load, and the load then walked the healing
# ladder and remembered a workaround for a hiccup; with the wait, 3 of 3 passed.
RPC_RETRY_AFTER_S = 3.0


@dataclass
class Slot:
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


class Loader:
    """Starts runners with ``runtime``'s settings, resolver, projectors, workarounds and attention choices
    (read when a load needs them), and keeps the thread budget its runners share."""

    def __init__(self, runtime):
        self.runtime = runtime
        # the cores, split between the runners decoding: made at the first load, told by the runtime who decodes
        self.budget: ThreadBudget | None = None

    def start(self, model_id: str, opts: LoadOptions, on_progress: ProgressFn | None,
              cancel: threading.Event | None, ttl_s: float | None, embedding: bool) -> Slot:
        """Start a runner for ``model_id`` with ``opts`` and return the loaded model's slot."""
        path = Path(self.runtime.resolver(model_id))  # a resolver may answer a str (bench/runtime.py)
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
        warnings: list[str] = [n.removeprefix(_GONE) for n in notes if n.startswith(_GONE)]  # a lender left out
        spawn = _Spawn(model_id, path, embedding, _never_back(on_progress), cancel, opts.threads,
                       str(mmproj) if mmproj else None,
                       {"path": str(draft), "name": opts.draft, "n_gpu_layers": -1 if plan.draft_gpu else 0,
                        "kv_type": plan.draft_kv}
                       if draft else None, *embedder_facts(info))
        if self.budget is None:
            self.budget = ThreadBudget(hardware.detect().cpu_cores)  # what a load takes when not told
        client, result, plan = self._spawn_or_smaller(spawn, plan, warnings)
        if result.get("vision_error"):
            warnings.append(f"{model_id} loaded for text only: {result['vision_error']}")
        if result.get("draft_error"):
            warnings.append(f"{model_id} loaded without a draft model: {result['draft_error']}")
        if result.get("lane_error"):
            warnings.append(f"{model_id} loaded without its long-chat lane: {result['lane_error']}")
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
        note_threads(loaded, result.get("threads"))
        if measure is not None:
            threading.Thread(target=measure, name="fireside-attention-calibration", daemon=True).start()
        log.info("loaded %s in runner %d (%s, ctx %d, %d slots)", model_id, client.pid, plan.verdict, loaded.n_ctx,
                 loaded.parallel)
        return Slot(model_id, info, plan, opts, client, template, result.get("add_bos", False), loaded,
                    self.runtime.idle_ttl_s if ttl_s is None else ttl_s, notes=notes,
                    max_chars=max_prompt_chars(loaded.n_ctx, result.get("longest_piece", 0)))

    def _spawn_or_smaller(self, spawn: _Spawn, plan: FitPlan,
                          warnings: list[str]) -> tuple[RunnerClient, dict, FitPlan]:
        """Start a runner for ``plan`` (``_spawn_healing``); when the load fails, but not by a crash the
        ladder could not heal, again with smaller plans (``_fallbacks``: half the GPU layers, every layer on
        the CPU, the GPU off; or half the context). GPU layers that had to go are remembered for this
        machine and model, and a later load starts from what loaded."""
        model_id, cancel = spawn.model_id, spawn.cancel
        key = healing.machine_key(hardware.detect(), spawn.path)
        plan = self._remembered_layers(key, model_id, plan, warnings)
        try:
            return self._spawn_healing(spawn, plan, warnings)
        except DeviceGone as gone:  # nothing about this machine to shrink or remember: say so and stop
            raise DeviceGone(str(gone).replace("mid-reply", f"while {model_id} was loading"), gone.signal) from None
        except (RuntimeFailure, RunnerCrashed) as failure:
            first = failure
        for smaller, change in _fallbacks(plan):
            if isinstance(first, LoadCancelled) or (cancel and cancel.is_set()):
                raise LoadCancelled(f"loading {model_id} was cancelled") from None
            if isinstance(first, RunnerCrashed) and healing.is_crash(first.signal):
                break
            log.warning("load of %s failed (%s); retrying with %s", model_id, first, change)
            if spawn.on_progress:
                spawn.on_progress(LoadProgress(model_id, 0.0, f"the load failed; retrying with {change}"))
            try:
                loaded = self._spawn_healing(spawn, smaller, warnings)
            except (RuntimeFailure, RunnerCrashed):
                continue
            kept = ""
            if smaller.n_gpu_layers < plan.n_gpu_layers:
                self.runtime.workarounds.remember_layers(key, smaller.n_gpu_layers, model_id, str(first))
                kept = "; this is remembered for this machine (see Settings or `fireside hw`)"
            warnings.append(f"The first load of {model_id} failed ({first}); it loaded with {change} instead{kept}.")
            return loaded
        raise first

    def _remembered_layers(self, key: str, model_id: str, plan: FitPlan, warnings: list[str]) -> FitPlan:
        """``plan`` with no more GPU layers than loaded after the device refused more (``remember_layers``)."""
        cap = self.runtime.workarounds.gpu_layers(key)
        if cap is None or plan.n_gpu_layers <= cap:
            return plan
        warnings.append(f"{model_id} loaded with {healing.layers_words(cap)} instead of {plan.n_gpu_layers} GPU "
                        "layers, remembered after the device refused more on this machine (clear it in Settings "
                        "or with `fireside hw --clear-workarounds`).")
        return replace(plan, n_gpu_layers=cap, tensor_split=plan.tensor_split if cap else [])

    def _plan(self, model_id: str, path: Path, info, opts: LoadOptions, embedding: bool):
        """The fit plan for a load, the vision projector's and draft model's memory counted, the
        projector's path and the draft model's path; raises ``ModelTooLarge`` for a load llama.cpp would
        refuse or that does not fit, ``ModelNotFound`` for a draft model that is not there."""
        opts = opts.within(self.runtime.settings)
        hw, rpc = hardware.detect(refresh=True), {}  # free memory now, other models included
        gone: list[str] = []
        if opts.with_devices:  # paired devices' lent memory, each a device the planner places layers on
            lent, rpc, gone = self.runtime.lenders().offer(opts.with_devices, skip_gone=True)
            hw = replace(hw, devices=[*hw.devices, *lent])  # a device that cannot be reached: planned without
            opts = replace(opts, with_devices=tuple(d.name.removeprefix("rpc:") for d in lent))
        plan = plan_fit(info, hw, opts)
        plan.notes.extend(f"{_GONE}{why}; {model_id} was planned without it" for why in gone)
        if rpc and plan.devices:
            from ..rpc import module

            plan.rpc = {name: rpc[name] for name in plan.devices if name in rpc}
            plan.rpc_module = str(module(self.runtime.settings.cache_dir) or "")
        mmproj = None if embedding else (opts.mmproj or self.runtime.projectors(model_id, path))
        projector = read_projector(mmproj) if mmproj else None
        if projector is not None:
            plan = with_projector(plan, projector.size, projector.compute_bytes)
        draft = None
        if opts.draft and not embedding:
            try:
                draft = Path(self.runtime.resolver(opts.draft))
                plan = with_draft(plan, inspect_file(draft))
            except (ModelNotFound, OSError, InvalidModelFile) as exc:
                raise ModelNotFound(f"the draft model for {model_id} cannot be used: {exc}") from None
        if plan.refusal:  # llama.cpp would refuse these options at any size: do not try, say why
            raise ModelTooLarge(f"{model_id} will not load: {plan.refusal}")
        if not plan.fits and opts.n_gpu_layers is None:
            where = f"this machine and {', '.join(opts.with_devices)} have" if opts.with_devices else "this machine has"
            raise ModelTooLarge(f"{model_id} needs about {plan.shortfall_bytes / 2**30:.1f} GiB more memory than "
                                f"{where} free at a {plan.context:,}-token context; try a smaller context "
                                f"(largest that fits: {plan.max_context:,}) or a smaller quantization")
        return plan, mmproj, draft

    def _attention(self, model_id: str, path, info: ModelInfo, opts: LoadOptions, plan: FitPlan,
                   embedding: bool) -> tuple[FitPlan, Callable[[], None] | None]:
        """The plan with the attention this machine measured fastest for the model's architecture
        (``attention.py``), when the load left the choice to Fireside (KV type auto, flash attention
        unset, on the CPU); and, when nothing is remembered yet, the calibration to run after the load."""
        if not attention.leaves_choice(opts, plan, embedding):
            return plan, None
        threads = opts.threads or hardware.detect().cpu_cores
        k = attention.model_key(hardware.detect(), info, threads)
        entry = self.runtime.attention.get(k)
        if entry is None:
            if not self.runtime.calibrate:
                return plan, None

            def measure() -> None:
                try:
                    self.runtime.attention.remember(k, attention.calibrate(str(path), threads), model_id)
                    log.info("attention calibrated for %s: %s", model_id, attention.describe(self.runtime.attention.get(k)))
                except Exception as exc:  # a crash or a timeout: the default stays, measured again next time
                    log.warning("attention calibration for %s failed: %s", model_id, exc)
            return plan, measure
        return attention.planned(plan, info, opts, entry), None

    def _spawn_healing(self, spawn: _Spawn, plan: FitPlan, warnings: list[str]) -> tuple[RunnerClient, dict, FitPlan]:
        """Start a runner for ``plan``; when llama.cpp crashes it (a signal during load or warm-up), walk
        the safety ladder (``healing.py``) until a configuration survives, and remember that one."""
        key = healing.machine_key(hardware.detect(), spawn.path)
        remembered = rungs = self.runtime.workarounds.get(key)
        if rungs:
            log.info("loading %s with the remembered workaround for this machine: %s", spawn.model_id,
                     healing.describe(rungs))
        crashed: RunnerCrashed | None = None
        again = bool(plan.rpc)  # a load across paired devices: one death is not yet llama.cpp's kernels
        while True:
            try:
                client, result = self._spawn(spawn, plan, rungs)
                break
            except DeviceGone:
                raise
            except RunnerCrashed as crash:
                cancelled = bool(spawn.cancel and spawn.cancel.is_set())
                if again and healing.is_crash(crash.signal) and not cancelled:
                    # a network hiccup at the RPC connect or a worker starting late kills the load the same
                    # way a kernel does; a workaround remembered for that would slow every later load
                    again = False
                    log.warning("the runner for %s died (%s) loading with layers on %s; trying the same "
                                "configuration once more", spawn.model_id, healing.signal_name(crash.signal),
                                ", ".join(name.removeprefix("rpc:") for name in plan.rpc))
                    _wait_to_retry(spawn)
                    continue
                safer = healing.next_rungs(plan, rungs)
                if not healing.is_crash(crash.signal) or cancelled or safer is None:
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
            self.runtime.workarounds.remember(key, rungs, spawn.model_id, f"crashed by {healing.signal_name(crashed.signal)}")
            warnings.append(f"llama.cpp crashed ({healing.signal_name(crashed.signal)}) while loading "
                            f"{spawn.model_id}, so Fireside loaded it with {healing.describe(rungs)}; this is "
                            "remembered for this machine (see Settings or `fireside hw`).")
        elif remembered:
            warnings.append(f"{spawn.model_id} loaded with {healing.describe(rungs)}, remembered after a llama.cpp "
                            "crash on this machine (clear it in Settings or with `fireside hw --clear-workarounds`).")
        return client, result, healing.apply(plan, rungs)

    def _spawn(self, spawn: _Spawn, plan: FitPlan, rungs: tuple[str, ...] = ()) -> tuple[RunnerClient, dict]:
        model_id, path, embedding = spawn.model_id, spawn.path, spawn.embedding
        on_progress, cancel, rt = spawn.on_progress, spawn.cancel, self.runtime
        client = RunnerClient(model_id, rt.settings.cache_dir / "logs", rt.max_queue, rt.runner_command, plan.huge_pages)
        client.lent_by = [name.removeprefix("rpc:") for name in plan.rpc]
        kwargs = healing.load_kwargs(plan, rungs)
        if embedding:
            kwargs.update(embedding_kwargs(spawn.pooling, spawn.positions, kwargs))
        try:
            for msg in client.submit("load", cancel=cancel, kill_after_s=CANCEL_KILL_S, path=str(path), kwargs=kwargs,
                                     mmproj=spawn.mmproj,
                                     draft=spawn.draft,
                                     threads_fixed=spawn.fixed_threads is not None,
                                     kvcache=None if embedding else cache_config(rt.settings)):
                if msg["type"] == "progress" and on_progress:  # 1.0 only once loaded and warmed up
                    on_progress(LoadProgress(model_id, min(msg["fraction"], LOADING_MAX)))
                elif msg["type"] == "error":
                    if msg.get("error") == "LoadCancelled":
                        raise LoadCancelled(f"loading {model_id} was cancelled")
                    raise RuntimeFailure(f"could not load {model_id}: {msg['message']}")
                elif msg["type"] == "result":
                    if cancel is not None and cancel.is_set():  # cancelled after llama.cpp's part (warm-up, projector)
                        raise LoadCancelled(f"loading {model_id} was cancelled")
                    if on_progress:
                        on_progress(LoadProgress(model_id, 1.0, "loaded"))
                    return client, msg
            raise RuntimeFailure(f"the runner for {model_id} ended the load without an answer")
        except BaseException as exc:
            client.close()
            if isinstance(exc, RunnerCrashed) and cancel is not None and cancel.is_set():
                raise LoadCancelled(f"loading {model_id} was cancelled") from None  # killed for not stopping, or died meanwhile
            raise


def cache_config(settings: Settings) -> dict | None:
    """What a runner is told about the prompt cache on disk (``kvcache.py``, ``runner/kvstate.py``); None when it is off."""
    if not settings.prompt_cache:
        return None
    return CacheConfig(str(settings.prompt_cache_dir), settings.prompt_cache_cap_bytes).to_dict()


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


def note_threads(loaded: LoadedModel, threads: dict | None) -> None:
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


def _fallbacks(plan: FitPlan) -> list[tuple[FitPlan, str]]:
    """Smaller plans to retry a failed load with, in order, each with what changed in words: with GPU
    layers, half of them, then every layer on the CPU, then the GPU off (llama.cpp still runs a prompt's
    large products on a device it may use); on the CPU, half the context."""
    if plan.n_gpu_layers > 0:
        half = plan.n_gpu_layers // 2
        out = [(replace(plan, n_gpu_layers=half), f"{half} GPU layers instead of {plan.n_gpu_layers}")] if half else []
        out.append((replace(plan, n_gpu_layers=0, tensor_split=[]),
                    f"every layer on the CPU instead of {plan.n_gpu_layers} GPU layers"))
        if plan.devices != []:
            out.append((replace(plan, n_gpu_layers=0, tensor_split=[], devices=[]), "the GPU off"))
        return out
    if plan.context > 2048:
        half = max(2048, plan.context // 2)
        return [(replace(plan, context=half), f"a {half:,}-token context instead of {plan.context:,}")]
    return []


def _wait_to_retry(spawn: _Spawn) -> None:
    """Before a load across paired devices is tried once more: say so, and give the lenders
    ``RPC_RETRY_AFTER_S`` to end the dead runner's session; Cancel meanwhile ends the load at once."""
    if spawn.on_progress:
        spawn.on_progress(LoadProgress(spawn.model_id, 0.0, "the load stopped; trying it again"))
    if spawn.cancel is None:
        time.sleep(RPC_RETRY_AFTER_S)
    elif spawn.cancel.wait(RPC_RETRY_AFTER_S):
        raise LoadCancelled(f"loading {spawn.model_id} was cancelled")
