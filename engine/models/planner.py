"""The fit planner: where a model's layers go and how much memory each device will need.

``plan_fit(info, hardware, options)`` takes a model's inspection, the devices present and the user's
load options, and returns a ``FitPlan``: how many layers go to which GPU, the bytes expected on each
GPU and in RAM (weights, KV cache, compute buffer, reserve), a verdict (``full_gpu``, ``partial``,
``cpu_only`` or ``will_not_fit`` with the shortfall) and the largest context that keeps the verdict.
User overrides win over every automatic choice. The plan is a plain value: the runtime loads with
``plan.llama_kwargs()`` and compares ``plan`` with what llama.cpp then reports allocating
(``plan.compare(...)``), which is how the estimates here get calibrated.

The estimates follow llama.cpp's own placement: the token embedding stays in host memory, the last
``n_gpu_layers`` repeating layers go to the GPUs (split by ``tensor_split``), the output layer follows
them when every layer is offloaded, and each offloaded layer keeps its KV cache beside it.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from .hardware import Device, Hardware
from .inspection import ModelInfo

MiB = 1024 * 1024
GPU_RESERVE_MIN = 256 * MiB  # driver context, fragmentation, other apps' growth
GPU_RESERVE_FRACTION = 0.05
RAM_OVERHEAD = 256 * MiB  # the runner process itself: Python, llama.cpp, tokenizer tables
VERDICT_RANK = {"will_not_fit": 0, "cpu_only": 1, "partial": 2, "full_gpu": 3}
# The words a person sees for each verdict, in the app (Discover, the load dialog) and the CLI alike.
VERDICT_WORDS = {"full_gpu": "Fits on the GPU", "partial": "Split between GPU and CPU",
                 "cpu_only": "Runs on the CPU", "will_not_fit": "Will not fit"}


def verdict_text(verdict: str) -> str:
    """The verdict as the app shows it ("Runs on the CPU"); an unknown verdict is shown as it is."""
    return VERDICT_WORDS.get(verdict, verdict)


def drafting_text(plan: FitPlan) -> str:
    """Where speculative decoding's drafts come from in this load, in words (``fireside info``, the
    load dialog)."""
    sources = ["a request's prediction"]
    if plan.drafts:
        sources.append("prompt lookup")
    if plan.draft_model:
        sources.append(f"the draft model {plan.draft_model} (on {'the GPU' if plan.draft_gpu else 'the CPU'})")
    return ", ".join(sources[:-1]) + f" and {sources[-1]}" if len(sources) > 1 else f"only from {sources[0]}"

# Each slot (a request decoded alongside others) gets a KV cache of ``context`` tokens of its own, as
# Ollama's OLLAMA_NUM_PARALLEL does: every conversation can use the whole context it was loaded with,
# and its numerics do not depend on the other slots (see runner/batch.py), which keeps seeds honest.
# The cost is KV memory for N contexts, so the automatic choice is the most slots, up to
# DEFAULT_PARALLEL (llama-server's and LM Studio's four), that keep the verdict and GPU layers of one.
DEFAULT_PARALLEL = 4


@dataclass(frozen=True)
class LoadOptions:
    """What the user asked for; ``None`` means "decide for me"."""

    n_gpu_layers: int | None = None  # llama.cpp semantics: block_count + 1 also offloads the output layer
    tensor_split: tuple[float, ...] | None = None
    main_gpu: int | None = None
    context: int | None = None
    kv_type: str = "auto"  # "auto": EXACT_KV where replies can be exact (kv_for), else f16
    flash_attn: bool | None = None
    threads: int | None = None
    use_mmap: bool = True
    use_mlock: bool = False
    n_batch: int = 512
    parallel: int | None = None  # slots: requests decoded together (None: DEFAULT_PARALLEL)
    mmproj: str | None = None  # the vision projector's path (None: the one the library pairs with the model, if any)
    drafts: bool = False  # speculative decoding's prompt-lookup drafts (runner/drafts.py): off until
    # bench/speculative.py shows they pay; on, short replies ran about 11% slower (tests/server/test_conformance.py)
    draft: str | None = None  # a draft model (a library id or a .gguf path) with the same vocabulary (draftmodel.py)
    device: str | None = None  # offload to this device alone (``Hardware.named``); the only way onto a software one
    gpu_budget_gib: float | None = None  # the most device memory to plan for on each device (FIRESIDE_GPU_BUDGET_GIB)

    @classmethod
    def from_dict(cls, d: dict | None) -> LoadOptions:
        d = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__ and v is not None}
        if "tensor_split" in d:
            d["tensor_split"] = tuple(d["tensor_split"])
        return cls(**d)


@dataclass
class DeviceUse:
    """The bytes one device is expected to hold."""

    name: str
    layers: int
    weights_bytes: int
    kv_bytes: int
    compute_bytes: int
    reserve_bytes: int
    available_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_bytes + self.compute_bytes + self.reserve_bytes

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.available_bytes


@dataclass
class FitPlan:
    verdict: str
    n_layers: int
    n_gpu_layers: int
    tensor_split: list[float]
    main_gpu: int
    context: int
    trained_context: int
    kv_type: str
    flash_attn: bool
    threads: int
    use_mmap: bool
    use_mlock: bool
    n_batch: int
    gpus: list[DeviceUse]
    ram: DeviceUse
    shortfall_bytes: int
    max_context: int = 0
    notes: list[str] = field(default_factory=list)
    refusal: str | None = None  # why llama.cpp would refuse these options whatever the memory
    parallel: int = 1  # slots, each with a KV cache of ``context`` tokens
    drafts: bool = False  # prompt-lookup drafts (the runner takes this one, when on)
    draft_model: str = ""  # the draft model's file name, when one is loaded beside it (with_draft)
    draft_gpu: bool = False  # and whether it goes on the main GPU (else it runs on the CPU)
    draft_kv: str = "f16"  # and its KV cache's type
    devices: list[str] | None = None  # the devices llama.cpp may offload to (None: all it found)
    row_kernels: bool = False  # K-quant weights multiplied by the one-row kernels only (_keep_exact)
    inexact_weights: list[str] = field(default_factory=list)  # weight types no switch makes batch-invariant

    @property
    def fits(self) -> bool:
        return self.verdict != "will_not_fit"

    @property
    def gpu_bytes(self) -> int:
        return sum(g.total_bytes for g in self.gpus)

    def llama_kwargs(self) -> dict[str, object]:
        """Keyword arguments for ``llama_cpp.Llama`` that load exactly this plan."""
        kw: dict[str, object] = {
            "n_gpu_layers": self.n_gpu_layers,
            "main_gpu": self.main_gpu,
            "n_ctx": self.context,
            "n_batch": self.n_batch,
            "n_threads": self.threads,
            "use_mmap": self.use_mmap,
            "use_mlock": self.use_mlock,
            "flash_attn": self.flash_attn,
            "n_seq_max": self.parallel,  # the runner takes this one: Llama() has no such parameter
        }
        if self.drafts:
            kw["drafts"] = True  # the runner takes this one too (off when left out)
        if len(self.tensor_split) > 1:
            kw["tensor_split"] = self.tensor_split
        if self.devices is not None:
            kw["devices"] = list(self.devices)  # the runner takes this one: llama_model_params.devices
        if self.kv_type != "f16":
            kw["type_k"] = kw["type_v"] = _GGML_KV_TYPE[self.kv_type]
        if self.row_kernels:  # the runner takes both: a model param and ggml's GGML_CPU_TILED_MM switch
            kw["use_extra_bufts"] = kw["tiled_mm"] = False
        return kw

    def compare(self, reported: dict[str, int]) -> dict[str, dict[str, float]]:
        """Set planned bytes beside what llama.cpp reported (keys: ``weights``, ``kv``, ``compute``)."""
        planned = {
            "weights": sum(g.weights_bytes for g in self.gpus) + self.ram.weights_bytes,
            "kv": sum(g.kv_bytes for g in self.gpus) + self.ram.kv_bytes,
            "compute": sum(g.compute_bytes for g in self.gpus) + self.ram.compute_bytes,
        }
        return {k: {"planned": planned[k], "reported": reported[k],
                    "ratio": planned[k] / reported[k] if reported.get(k) else float("nan")}
                for k in planned if k in reported}

    def compare_devices(self, buffers: dict[str, float]) -> dict[str, dict[str, int]]:
        """Set the planned bytes on the offload devices and in host memory (weights, KV, compute; no
        reserve) beside llama.cpp's logged buffers (MiB by "BUFFER kind", as the runner collects them): a
        buffer named after a planned device (``Vulkan0``, ``CUDA0``) is on the device, the rest
        (``CPU``, ``CPU_Mapped``, ``Vulkan_Host``, ``CUDA_Host``) in host memory."""
        names = tuple(g.name for g in self.gpus)
        reported = {"device": 0.0, "host": 0.0}
        for key, mib in buffers.items():
            reported["device" if key.split(" ", 1)[0] in names else "host"] += mib
        planned = {"device": sum(g.weights_bytes + g.kv_bytes + g.compute_bytes for g in self.gpus),
                   "host": self.ram.weights_bytes + self.ram.kv_bytes + self.ram.compute_bytes}
        return {k: {"planned": planned[k], "reported": int(reported[k] * 2**20)} for k in planned}

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["fits"] = self.fits
        for use, out in zip([*self.gpus, self.ram], [*d["gpus"], d["ram"]]):
            out["total_bytes"] = use.total_bytes
        return d


_GGML_KV_TYPE = {"f16": 1, "q8_0": 8, "q4_0": 2}  # enum ggml_type values


def _compute_bytes(info: ModelInfo, ctx: int, ubatch: int, flash: bool, with_output: bool) -> int:
    """llama.cpp's compute buffer: activations for one ubatch, the attention scores, and the logits."""
    ubatch = min(ubatch, ctx)
    activations = ubatch * max(info.embedding_length, 1) * 4 * 8
    head_dim = max(info.key_length, 1)
    if flash:
        attention = ubatch * info.head_count * head_dim * 4 * 2
    else:
        padded = (ctx + 255) // 256 * 256
        attention = ubatch * padded * info.head_count * 4
    logits = ubatch * info.vocab_size * 4 if with_output else 0
    # ggml's allocator reuses memory between graph nodes: the attention scores and the logits are never
    # alive at once, so the buffer is sized by the larger phase, not their sum.
    return activations + max(attention, logits)


def _distribute(n: int, ratios: list[float]) -> list[int]:
    """Split n layers across GPUs the way llama.cpp does from a tensor split (cumulative fractions)."""
    total = sum(ratios)
    if n <= 0 or total <= 0:
        return [0] * len(ratios)
    counts = [0] * len(ratios)
    cum, acc = [], 0.0
    for r in ratios:
        acc += r / total
        cum.append(acc)
    for i in range(n):
        frac = i / n
        j = next((k for k, c in enumerate(cum) if frac < c), len(ratios) - 1)
        counts[j] += 1
    return counts


class _Costs:
    """Per-layer and fixed costs of one model at one context and KV type."""

    def __init__(self, info: ModelInfo, ctx: int, kv_type: str, flash: bool, ubatch: int, slots: int = 1):
        self.info, self.ctx, self.flash, self.ubatch = info, ctx, flash, ubatch
        kv = info.kv_bytes_per_token_by_layer(kv_type)
        self.layers = [(w, k * ctx * slots) for w, k in zip(info.layer_bytes, kv)]
        self.output = info.other_bytes.get("output", 0)
        # Tied embeddings: the output layer reuses the token embedding, which a GPU then needs a copy of.
        self.output_gpu = self.output + (info.other_bytes.get("input", 0) if info.tied_embeddings else 0)
        self.host_fixed = info.other_bytes.get("input", 0) + info.other_bytes.get("other", 0)

    def compute(self, with_output: bool) -> int:
        return _compute_bytes(self.info, self.ctx, self.ubatch, self.flash, with_output)


def _offload_devices(hw: Hardware, o: LoadOptions, notes: list[str]) -> tuple[list[Device], list[Device] | None, str | None]:
    """The devices to plan layers on, their memory capped by the GPU budget (llvmpipe reports host
    memory as its own), what to tell llama.cpp (None: let it use all it found) and a refusal for a device
    that is not there."""
    gpus, devices, refusal = _named_devices(hw, o.device)
    if o.gpu_budget_gib is not None and gpus:
        cap = int(o.gpu_budget_gib * 2**30)
        gpus = [replace(g, free_bytes=min(g.free_bytes, cap), total_bytes=min(g.total_bytes, cap)) for g in gpus]
        notes.append(f"device memory capped at {o.gpu_budget_gib:g} GiB (the GPU budget)")
    return gpus, devices, refusal


def _named_devices(hw: Hardware, name: str | None) -> tuple[list[Device], list[Device] | None, str | None]:
    """A named device is used alone; a software one (llvmpipe) is used only when named, and when one is
    present llama.cpp is told the devices, since it would otherwise offload to it too."""
    if name:
        dev = hw.named(name)
        if dev is None:
            have = ", ".join(f"{d.name} ({d.description})" for d in hw.devices if d.can_offload) or "none"
            return [], [], f"there is no offload device called {name!r} (devices: {have}; see `fireside hw`)"
        return [dev], [dev], None
    return hw.gpus, (hw.gpus if hw.software else None), None


def _reserve(dev: Device) -> int:
    return max(GPU_RESERVE_MIN, int(dev.total_bytes * GPU_RESERVE_FRACTION))


def _place(costs: _Costs, gpus: list[Device], n_gpu: int, ratios: list[float], hw: Hardware) -> tuple[list[DeviceUse], DeviceUse]:
    n_layers = len(costs.layers)
    n_rep = min(n_gpu, n_layers)
    output_on_gpu = n_gpu > n_layers and bool(gpus)
    counts = _distribute(n_rep, ratios) if gpus else []
    first = n_layers - n_rep  # llama.cpp offloads the last n_gpu_layers repeating layers
    uses, layer = [], first
    last_used = max((j for j, c in enumerate(counts) if c), default=-1)
    for j, dev in enumerate(gpus):
        w = k = 0
        for _ in range(counts[j]):
            w += costs.layers[layer][0]
            k += costs.layers[layer][1]
            layer += 1
        holds_output = output_on_gpu and j == last_used
        if holds_output:
            w += costs.output_gpu
        used = counts[j] > 0
        uses.append(DeviceUse(dev.name, counts[j], w, k, costs.compute(holds_output) if used else 0,
                              _reserve(dev) if used else 0, dev.free_bytes))
    cpu_w = costs.host_fixed + sum(w for w, _ in costs.layers[:first]) + (0 if output_on_gpu else costs.output)
    cpu_k = sum(k for _, k in costs.layers[:first])
    # The host keeps a full compute buffer while any layer or the output runs there, a small one otherwise.
    cpu_compute = costs.compute(True) if n_rep < n_layers or not output_on_gpu else costs.ubatch * 4096 * 4
    ram = DeviceUse("RAM", n_layers - n_rep, cpu_w, cpu_k, cpu_compute, RAM_OVERHEAD, hw.ram_available_bytes)
    return uses, ram


def _auto_layers(costs: _Costs, gpus: list[Device], ratios: list[float] | None, hw: Hardware) -> tuple[int, list[float]]:
    """The most layers that fit, with the split that fits them (free-memory split unless the user set one)."""
    n_layers = len(costs.layers)
    if not gpus:
        return 0, []
    if ratios is None:
        # Greedy fill, in device order: each GPU takes the next layers while its budget lasts.
        counts, budgets = [0] * len(gpus), [g.free_bytes - _reserve(g) - costs.compute(False) for g in gpus]
        j, layer = 0, n_layers - 1
        while layer >= 0 and j < len(gpus):
            cost = sum(costs.layers[layer])
            if cost <= budgets[j]:
                budgets[j] -= cost
                counts[j] += 1
                layer -= 1
            else:
                j += 1
        n = sum(counts)
        ratios = [float(c) for c in counts] if n else [float(g.free_bytes) for g in gpus]
    for n in range(n_layers + 1, -1, -1):
        uses, _ = _place(costs, gpus, n, ratios, hw)
        if all(u.fits for u in uses):
            return n, ratios
    return 0, ratios


def plan_fit(info: ModelInfo, hw: Hardware, options: LoadOptions | None = None, *, _search_context: bool = True) -> FitPlan:
    """Plan how to load ``info`` on ``hw``. Pure: no I/O, no llama.cpp calls; safe on any thread."""
    o = options or LoadOptions()
    if o.parallel is None:
        return _auto_parallel(info, hw, o, _search_context)
    trained = info.context_length or 4096
    ctx = max(16, o.context or min(trained, 8192))
    notes: list[str] = []
    if o.context and o.context > trained:
        notes.append(f"context {o.context} is past the {trained} tokens the model was trained on")
    gpus, devices, named_refusal = _offload_devices(hw, o, notes)
    o, flash, refusal = _attention(info, o, bool(gpus), notes)
    refusal = named_refusal or refusal
    costs = _Costs(info, ctx, o.kv_type, flash, o.n_batch, max(1, o.parallel))
    user_ratios = list(o.tensor_split) if o.tensor_split else None
    if user_ratios and len(user_ratios) != len(gpus):
        notes.append(f"tensor split has {len(user_ratios)} entries for {len(gpus)} GPUs; extra entries ignored")
        user_ratios = (user_ratios + [0.0] * len(gpus))[: len(gpus)]
    if o.n_gpu_layers is not None:
        n_gpu = max(0, min(o.n_gpu_layers if o.n_gpu_layers >= 0 else info.block_count + 1, info.block_count + 1))
        ratios = user_ratios or [float(g.free_bytes) for g in gpus]
        if not gpus and n_gpu:
            notes.append("GPU layers requested, but this llama.cpp build has no GPU: running on the CPU")
            n_gpu = 0
    else:
        n_gpu, ratios = _auto_layers(costs, gpus, user_ratios, hw)
    uses, ram = _place(costs, gpus, n_gpu, ratios, hw)
    used = [j for j, u in enumerate(uses) if u.layers]
    main_gpu = o.main_gpu if o.main_gpu is not None else (used[-1] if used else 0)
    shortfall = sum(max(0, u.total_bytes - u.available_bytes) for u in [*uses, ram])
    if shortfall or refusal:
        verdict = "will_not_fit"
    elif n_gpu == 0:
        verdict = "cpu_only"
    elif n_gpu > info.block_count:
        verdict = "full_gpu"
    else:
        verdict = "partial"
    plan = FitPlan(
        verdict=verdict, n_layers=info.block_count, n_gpu_layers=n_gpu,
        tensor_split=[r for r in ratios] if len(used) > 1 else [], main_gpu=main_gpu, context=ctx,
        trained_context=trained, kv_type=o.kv_type, flash_attn=flash,
        threads=o.threads or max(1, hw.cpu_cores), use_mmap=o.use_mmap, use_mlock=o.use_mlock,
        n_batch=o.n_batch, gpus=uses, ram=ram, shortfall_bytes=shortfall, notes=notes, refusal=refusal,
        parallel=max(1, o.parallel), drafts=o.drafts,
        devices=None if devices is None else [g.name for g, u in zip(gpus, uses) if u.layers or o.device],
    )
    _keep_exact(plan, info)
    if _search_context and not refusal:
        plan.max_context = _largest_context(info, hw, o, plan)
    return plan


def with_projector(plan: FitPlan, weights_bytes: int, compute_bytes: int) -> FitPlan:
    """``plan`` with a vision projector (``projector.py``) on the device mtmd runs it on: the main GPU
    when any layer is offloaded there, else RAM. Its weights and compute buffer count like the model's
    own, so a projector that does not fit turns the verdict to ``will_not_fit``."""
    plan = copy.deepcopy(plan)
    device = _beside(plan, plan.n_gpu_layers > 0, weights_bytes, 0, compute_bytes)
    plan.notes.append(f"vision projector on {device.name}: {weights_bytes / 2**20:.0f} MiB of weights, about "
                      f"{compute_bytes / 2**20:.0f} MiB of compute buffer")
    return plan


def with_draft(plan: FitPlan, draft: ModelInfo) -> FitPlan:
    """``plan`` with a draft model (``runner/draftmodel.py``) beside the model: its weights and
    a KV cache as long as every slot's, on the main GPU when the model is wholly there, else in RAM
    (a GPU the model only partly fits on has no room for it). Counted like the model's own, so a
    draft that does not fit turns the verdict to ``will_not_fit``."""
    plan = copy.deepcopy(plan)
    plan.draft_model, plan.draft_gpu = Path(draft.path).name, plan.verdict == "full_gpu"
    # the model's cache type where the draft's heads allow it (a draft's numbers change how many of its
    # guesses are taken, never the reply: every guess is verified by the model)
    plan.draft_kv = plan.kv_type if kv_fits(draft, plan.kv_type) else "f16"
    kv = draft.kv_bytes_per_token(plan.draft_kv) * plan.context * plan.parallel
    device = _beside(plan, plan.draft_gpu, draft.file_size, kv, 0)
    plan.notes.append(f"draft model {plan.draft_model} on {device.name}: {draft.file_size / 2**20:.0f} MiB of "
                      f"weights, {kv / 2**20:.0f} MiB of KV cache")
    return plan


def _beside(plan: FitPlan, on_gpu: bool, weights_bytes: int, kv_bytes: int, compute_bytes: int) -> DeviceUse:
    """Count what a load adds beside the model on the main GPU (``on_gpu``, if there is one) or in
    RAM; the verdict turns to ``will_not_fit`` when it does not fit. Returns the device."""
    on_gpu = on_gpu and 0 <= plan.main_gpu < len(plan.gpus)
    device = plan.gpus[plan.main_gpu] if on_gpu else plan.ram
    device.weights_bytes += weights_bytes
    device.kv_bytes += kv_bytes
    device.compute_bytes += compute_bytes
    plan.shortfall_bytes = sum(max(0, u.total_bytes - u.available_bytes) for u in [*plan.gpus, plan.ram])
    if plan.shortfall_bytes:
        plan.verdict = "will_not_fit"
    return device


EXACT_KV = "q8_0"  # the KV cache type whose attention is computed the same way for any batch and thread count


def kv_fits(info: ModelInfo, kv_type: str) -> bool:
    """Whether ``info``'s attention heads can be stored in a ``kv_type`` cache: llama.cpp refuses to
    create a context whose head size is not a whole number of the type's blocks (32 values)."""
    return kv_type == "f16" or (info.key_length % 32 == 0 and info.value_length % 32 == 0)


def kv_for(o: LoadOptions, gpus: bool, info: ModelInfo) -> str:
    """The KV cache type a load uses: the user's, or for ``auto`` the one that keeps replies exact.

    With an f16 cache, llama.cpp's CPU flash attention takes one of three paths by the work's shape:
    prompt chunks of 64 or more tokens a stream go through a tiled kernel, a lone stream's next token
    at 512 cells or more has its cache split between the threads (by their count), and everything
    else one row at a time over the whole cache. Each rounds differently (logits moved by up to 1.2
    on the starter), so a reply depended on how its prompt was chunked (cold or cached), on the
    thread count the machine's load chose, and on the other streams and drafts in its steps. A
    quantized cache takes the row path for every shape, so a token's numbers are a function of the
    tokens before it alone (tests/server/test_same_reply.py); q8_0 also halves the cache.
    GPU backends choose kernels by batch size whatever the cache holds, so there ``auto`` keeps f16,
    and so it does with flash attention turned off (a quantized V cache needs it) and for heads that
    a quantized cache cannot hold (``kv_fits``)."""
    if o.kv_type != "auto":
        return o.kv_type
    return "f16" if gpus or o.flash_attn is False or not kv_fits(info, EXACT_KV) else EXACT_KV


# weight types that llama.cpp's CPU multiplies by a kernel chosen by the batch's rows: the tiled kernel
# (ggml-cpu/tiled, 8 rows and more) and, for Q4_K and Q2_K, the repacked gemm (4 rows and more, an extra
# buffer type), each rounding otherwise than the one-row kernel a decoded token takes. Q4_0, Q4_1, Q5_0 and
# Q8_0 round the same in any batch (bench/batch_invariance.py, issue 50)
BATCH_VARIANT_TYPES = frozenset({"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                                 "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"})
# and those whose batches of 2 rows and more take llamafile's sgemm, built in and with no switch at run time:
# an IQ4_NL copy of the starter DIFFERED from its first batched token with the other two switches off
SGEMM_VARIANT_TYPES = frozenset({"IQ4_NL"})


def batch_variant_weights(info: ModelInfo, types: frozenset[str] = BATCH_VARIANT_TYPES) -> list[str]:
    """The model's weight types whose batched kernels round otherwise than a single row's, largest first."""
    return [t for t in info.quant_mix if t in types]


def _keep_exact(plan: FitPlan, info: ModelInfo) -> None:
    """An exact plan for a model with batch-variant weights multiplies them by the one-row kernels, and says
    so; weights no switch can keep exact make the plan's replies not guaranteed instead (``replies_text``)."""
    if not exact_replies(plan):
        return
    plan.inexact_weights = batch_variant_weights(info, SGEMM_VARIANT_TYPES)
    variant = batch_variant_weights(info)
    if variant and not plan.inexact_weights:
        plan.row_kernels = True
        plan.notes.append(f"{', '.join(variant)} weights are multiplied row by row, as one token is, so replies "
                          "stay exact (prompts evaluate slower; an f16 KV cache lifts both)")


def exact_replies(plan: FitPlan) -> bool:
    """Whether this load's greedy and seeded replies are a function of the request alone (kv_for)."""
    return plan.kv_type != "f16" and plan.flash_attn and plan.n_gpu_layers == 0 and not plan.inexact_weights


def replies_text(plan: FitPlan) -> str:
    """Whether a greedy or seeded request gets the same reply every time, in words (``fireside info``)."""
    if exact_replies(plan):
        return ("yes: greedy and seeded replies do not depend on the machine's load, the thread count, other "
                "streams, drafts or the prompt cache")
    if plan.n_gpu_layers:
        why = "GPU kernels are chosen by batch size"
    elif not plan.flash_attn:
        why = "flash attention is off"
    elif plan.inexact_weights:
        why = (f"{', '.join(plan.inexact_weights)} weights are multiplied in batches by llama.cpp's built-in "
               "sgemm, which rounds otherwise than one token's kernel")
    else:
        why = "an f16 KV cache is attended by kernels chosen by batch size and thread count"
    return f"not guaranteed ({why}); a reply may change with the load, other streams and the prompt cache"


def _attention(info: ModelInfo, o: LoadOptions, gpus: bool, notes: list[str]) -> tuple[LoadOptions, bool, str | None]:
    """The options with the KV cache's type decided (``kv_for``), flash attention on or off, and a
    refusal when llama.cpp would refuse the pair for this model."""
    chosen, o = o.kv_type != "auto", replace(o, kv_type=kv_for(o, gpus, info))
    flash, refusal = _flash_attention(o, notes if chosen else [])  # auto chose it: nothing to explain
    if not refusal and not kv_fits(info, o.kv_type):
        refusal = (f"its attention heads ({info.key_length} and {info.value_length} values) cannot be stored in a "
                   f"{o.kv_type} KV cache, whose blocks hold 32; use an f16 KV cache (or auto)")
    return o, flash, refusal


def _flash_attention(o: LoadOptions, notes: list[str]) -> tuple[bool, str | None]:
    """Flash attention on or off, and a refusal when the options break llama.cpp's rule that a quantized
    V cache needs flash attention (without it, creating the context fails at any size).

    On by default, as llama-server's "auto" resolves on CPUs and current GPUs: faster prompts, a smaller
    compute buffer, and attention that skips other slots' cells instead of summing their zeros, which
    keeps a sequence's numerics (and so its seeded text) independent of the others."""
    if o.kv_type == "f16":
        return (o.flash_attn if o.flash_attn is not None else True), None
    if o.flash_attn is None:
        notes.append(f"flash attention turned on: llama.cpp needs it for a quantized ({o.kv_type}) KV cache")
        return True, None
    if o.flash_attn:
        return True, None
    return False, (f"a quantized ({o.kv_type}) KV cache needs flash attention, which is turned off; turn flash "
                   f"attention on (or leave it on auto), or use an f16 KV cache")


def _auto_parallel(info: ModelInfo, hw: Hardware, o: LoadOptions, search_context: bool) -> FitPlan:
    """The plan with the most slots (up to DEFAULT_PARALLEL) that is as good as one slot's."""
    single = plan_fit(info, hw, replace(o, parallel=1), _search_context=False)
    n = 1
    for tried in (DEFAULT_PARALLEL, 2):
        p = plan_fit(info, hw, replace(o, parallel=tried), _search_context=False)
        if VERDICT_RANK[p.verdict] >= VERDICT_RANK[single.verdict] and p.n_gpu_layers >= single.n_gpu_layers:
            n = tried
            break
    plan = plan_fit(info, hw, replace(o, parallel=n), _search_context=False)
    if search_context:  # the largest context at which the planner may still choose one slot
        plan.max_context = _largest_context(info, hw, o, plan)
    if n < DEFAULT_PARALLEL:
        plan.notes.append(f"{n} parallel slot{'s' if n > 1 else ''}: the KV cache for more would not fit as well")
    return plan


def _largest_context(info: ModelInfo, hw: Hardware, o: LoadOptions, plan: FitPlan) -> int:
    """The largest context (up to the trained one) whose plan is at least as good as ``plan``."""
    target = max(VERDICT_RANK[plan.verdict], 1)
    lo, hi, best = 16, max(plan.trained_context, 16), 0

    def ok(ctx: int) -> bool:
        p = plan_fit(info, hw, replace(o, context=ctx), _search_context=False)
        return VERDICT_RANK[p.verdict] >= target and p.n_gpu_layers >= min(plan.n_gpu_layers, p.n_layers + 1)

    while lo <= hi:
        mid = (lo + hi) // 2
        if ok(mid):
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best
