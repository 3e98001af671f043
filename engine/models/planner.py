"""The fit planner: where a model's layers go and how much memory each device will need.

``plan_fit(info, hardware, options)`` takes a model's inspection, the devices present and the user's
load options, and returns a ``FitPlan``: how many layers go to which GPU, the bytes expected on each
GPU and in RAM (weights, KV cache, compute buffer, reserve), a verdict (``full_gpu``, ``partial``,
``cpu_only`` or ``will_not_fit`` with the shortfall) and the largest context that keeps the verdict.
User overrides win over every automatic choice. The plan is a plain value: the runtime loads with
``plan.llama_kwargs()`` and compares ``plan`` with what llama.cpp then reports allocating
(``plan.compare(...)``), which is how the estimates here get calibrated. The plan and the options are
``fitplan.py``'s values; the KV cache's type, flash attention and the kernels that keep replies exact
are ``exactness.py``'s choices.

The estimates follow llama.cpp's own placement (``_place``), checked against what it allocates on a real
Vulkan device (``bench/offload.py``): the token embedding stays in host memory, the output layer goes to
the GPU first, then the last ``n_gpu_layers - 1`` repeating layers (split by ``tensor_split``), each with
its KV cache beside it; a GPU runs a prompt's large products even for weights in RAM, so it keeps the
compute buffer; and with mmap the host's weights are one mapped range of the file.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path

from .exactness import ROW_KERNELS_NOTE, choose_attention, keep_exact, kv_fits
from .fitplan import DEFAULT_PARALLEL, VERDICT_RANK, DeviceUse, FitPlan, LoadOptions
from .hardware import Device, Hardware
from .inspection import KV_TYPE_BYTES, ModelInfo

MiB = 1024 * 1024
GPU_RESERVE_MIN = 256 * MiB  # driver context, fragmentation, other apps' growth
GPU_RESERVE_FRACTION = 0.05
RAM_OVERHEAD = 256 * MiB  # the runner process itself: Python, llama.cpp, tokenizer tables
HUGE_PAGES_RAM_SHARE = 0.5  # a load reads its weights into huge pages only within this share of free memory


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

    def __init__(self, info: ModelInfo, ctx: int, kv_type: str, flash: bool, ubatch: int, slots: int = 1,
                 experts_on_cpu: bool = False, mmap: bool = True):
        self.info, self.ctx, self.flash, self.ubatch, self.mmap = info, ctx, flash, ubatch, mmap
        kv = info.kv_bytes_per_token_by_layer(kv_type)
        # experts kept in host memory whichever device their layer is on (llama.cpp's tensor_buft_overrides)
        self.experts = list(info.expert_bytes) if experts_on_cpu and info.expert_bytes else [0] * len(kv)
        self.layers = [(w - e, k * ctx * slots) for w, e, k in zip(info.layer_bytes, self.experts, kv)]
        self.output = info.other_bytes.get("output", 0)
        # Tied embeddings: the output layer reuses the token embedding, which a GPU then needs a copy of.
        self.output_gpu = self.output + (info.other_bytes.get("input", 0) if info.tied_embeddings else 0)
        self.host_fixed = info.other_bytes.get("input", 0) + info.other_bytes.get("other", 0)

    def compute(self, with_output: bool) -> int:
        return _compute_bytes(self.info, self.ctx, self.ubatch, self.flash, with_output)

    def activations(self) -> int:
        """A ubatch's activations alone: the compute a host keeps while a device runs the large products."""
        return min(self.ubatch, self.ctx) * max(self.info.embedding_length, 1) * 4 * 8

    def host_weights(self, first: int, output_on_gpu: bool) -> int:
        """The host's weights when layers ``first`` and up are offloaded: with mmap, llama.cpp maps the host's
        tensors as one range of the file (from the first to the last of them, whatever lies between), so
        that range is what it reports (a file whose layers are stored out of order maps nearly whole)."""
        held = (self.host_fixed + sum(w for w, _ in self.layers[:first]) + sum(self.experts)
                + (0 if output_on_gpu else self.output))
        spans = self.info.spans
        groups = ["input", "other", *(f"blk.{i}" for i in range(first)), *([] if output_on_gpu else ["output"]),
                  *(f"exps.{i}" for i in range(first, len(self.layers)) if self.experts[i])]
        ranges = [spans[g] for g in groups if g in spans]
        if not (self.mmap and ranges and first < len(self.layers) + 1):
            return held
        by_file: dict[int, list[int]] = {}
        for index, start, end in ranges:
            lo_hi = by_file.setdefault(index, [start, end])
            lo_hi[0], lo_hi[1] = min(lo_hi[0], start), max(lo_hi[1], end)
        return max(held, sum(end - start for start, end in by_file.values()))


def _offload_devices(hw: Hardware, o: LoadOptions, notes: list[str]) -> tuple[list[Device], list[Device] | None, str | None]:
    """The devices to plan layers on, their memory capped by the GPU budget (llvmpipe reports host
    memory as its own), what to tell llama.cpp (None: let it use all it found) and a refusal for a device
    that is not there."""
    gpus, devices, refusal = _named_devices(hw, o.device)
    if o.gpu_budget_gib is not None and gpus:
        cap = int(o.gpu_budget_gib * 2**30)
        gpus = [replace(g, free_bytes=min(g.free_bytes, cap), total_bytes=min(g.total_bytes, cap)) for g in gpus]
        notes.append(f"device memory capped at {o.gpu_budget_gib:g} GiB (the GPU budget)")
    if o.with_devices:  # paired devices' lent memory, each under its own cap, after the local GPUs
        remote = {d.name: d for d in hw.remote}
        missing = [n for n in o.with_devices if f"rpc:{n}" not in remote]
        if missing:
            refusal = refusal or f"no memory lent by {', '.join(missing)} (`fireside devices ls` lists paired devices)"
        lent = [remote[f"rpc:{n}"] for n in o.with_devices if f"rpc:{n}" in remote]
        gpus, devices = [*gpus, *lent], [*gpus, *lent]
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
    """The bytes on each device and in RAM with ``n_gpu`` layers offloaded. llama.cpp counts the output layer
    first: ``n_gpu_layers`` >= 1 puts the output on the last GPU used and the last ``n_gpu_layers - 1``
    repeating layers beside it (llama-model.cpp's ``i_gpu_start``)."""
    n_layers = len(costs.layers)
    output_on_gpu = n_gpu >= 1 and bool(gpus)
    n_rep = min(n_gpu - 1, n_layers) if output_on_gpu else 0
    # llama.cpp splits the output's place with the layers', and the output's is the last
    counts = _distribute(n_rep + 1, ratios) if gpus else []
    weighted = [j for j, r in enumerate(ratios) if r > 0] or [0]
    last = max((j for j, c in enumerate(counts) if c), default=weighted[-1])
    if counts and counts[last]:
        counts[last] -= 1
    first = n_layers - n_rep
    uses, layer = [], first
    for j, dev in enumerate(gpus):
        w = k = 0
        for _ in range(counts[j]):
            w += costs.layers[layer][0]
            k += costs.layers[layer][1]
            layer += 1
        w += costs.output_gpu if output_on_gpu and j == last else 0
        # llama.cpp runs a prompt's large products on a device even for weights it does not hold (op
        # offload): the last device keeps a compute buffer with the logits (and, while the output layer is
        # in RAM, a copy of its weights), any other used one a buffer without.
        if j == last:
            compute = costs.compute(True) + (0 if output_on_gpu else costs.output_gpu)
        else:
            compute = costs.compute(False) if counts[j] else 0
        used = counts[j] > 0 or j == last
        uses.append(DeviceUse(dev.name, counts[j], w, k, compute, _reserve(dev) if used else 0, dev.free_bytes))
    cpu_w = costs.host_weights(first, output_on_gpu) if gpus else (
        costs.host_fixed + sum(w for w, _ in costs.layers) + costs.output)
    cpu_k = sum(k for _, k in costs.layers[:first])
    if not gpus:  # the CPU runs everything
        cpu_compute = costs.compute(True)
    elif n_rep < n_layers or any(costs.experts):  # layers' activations; the large products run on the device
        cpu_compute = costs.activations()
    else:
        cpu_compute = costs.ubatch * 4096 * 4
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


def _fewest_lent(costs: _Costs, gpus: list[Device], ratios: list[float] | None, hw: Hardware) -> tuple[int, list[float]]:
    """With paired devices' memory in the load: the fewest layers off this machine that let it fit (every
    layer on another machine costs the network a round trip per token), split by their free memory unless
    the user set a split; the most that fit when none does (the plan then says what is short)."""
    ratios = ratios or [float(g.free_bytes) for g in gpus]
    for n in range(0, len(costs.layers) + 2):
        uses, ram = _place(costs, gpus, n, ratios, hw)
        if ram.fits and all(u.fits for u in uses):
            return n, ratios
    return _auto_layers(costs, gpus, ratios, hw)


def _layers(info: ModelInfo, o: LoadOptions, costs: _Costs, gpus: list[Device], hw: Hardware,
            notes: list[str]) -> tuple[int, list[float]]:
    """The layers to offload and their split across ``gpus``: the user's, else the most that fit, else (with
    paired devices' lent memory) the fewest that let this machine hold the rest."""
    user_ratios = list(o.tensor_split) if o.tensor_split else None
    if user_ratios and len(user_ratios) != len(gpus):
        notes.append(f"tensor split has {len(user_ratios)} entries for {len(gpus)} GPUs; extra entries ignored")
        user_ratios = (user_ratios + [0.0] * len(gpus))[: len(gpus)]
    if o.n_gpu_layers is not None:
        n_gpu = max(0, min(o.n_gpu_layers if o.n_gpu_layers >= 0 else info.block_count + 1, info.block_count + 1))
        if not gpus and n_gpu:
            notes.append("GPU layers requested, but this llama.cpp build has no GPU: running on the CPU")
            n_gpu = 0
        return n_gpu, user_ratios or [float(g.free_bytes) for g in gpus]
    if hw.remote and o.with_devices:
        return _fewest_lent(costs, gpus, user_ratios, hw)
    return _auto_layers(costs, gpus, user_ratios, hw)


def plan_fit(info: ModelInfo, hw: Hardware, options: LoadOptions | None = None, *, _search_context: bool = True) -> FitPlan:
    """Plan how to load ``info`` on ``hw``. Pure: no I/O, no llama.cpp calls; safe on any thread."""
    o = options or LoadOptions()
    if o.ram_budget_gib is not None:
        hw = replace(hw, ram_available_bytes=min(hw.ram_available_bytes, int(o.ram_budget_gib * 2**30)))
    if o.parallel is None or o.experts_on_cpu is None:  # the automatic choices, each a plan_fit per option
        return (_auto_parallel if o.parallel is None else _auto_experts)(info, hw, o, _search_context)
    trained = info.context_length or 4096
    ctx = max(16, o.context or min(trained, 8192))
    notes: list[str] = []
    if o.context and o.context > trained:
        notes.append(f"context {o.context} is past the {trained} tokens the model was trained on")
    gpus, devices, named_refusal = _offload_devices(hw, o, notes)
    # a paired device's memory is its CPU's: the CPU's attention, and the CPU's exact replies
    o, flash, refusal = choose_attention(info, o, any(g.kind != "remote" for g in gpus), notes)
    refusal = named_refusal or refusal
    costs = _Costs(info, ctx, o.kv_type, flash, o.n_batch, max(1, o.parallel), o.experts_on_cpu, o.use_mmap)
    n_gpu, ratios = _layers(info, o, costs, gpus, hw, notes)
    uses, ram = _place(costs, gpus, n_gpu, ratios, hw)
    used = [j for j, u in enumerate(uses) if u.layers]
    main_gpu = o.main_gpu if o.main_gpu is not None else (used[-1] if used else 0)
    shortfall = sum(max(0, u.total_bytes - u.available_bytes) for u in [*uses, ram])
    if shortfall or refusal:
        verdict = "will_not_fit"
    elif n_gpu == 0:
        verdict = "cpu_only"
    elif n_gpu > info.block_count and not (o.experts_on_cpu and info.expert_bytes):  # experts in RAM: a split
        verdict = "full_gpu"
    else:
        verdict = "partial"
    plan = FitPlan(
        verdict=verdict, n_layers=info.block_count, n_gpu_layers=n_gpu,
        tensor_split=[r for r in ratios] if len(used) > 1 else [], main_gpu=main_gpu, context=ctx,
        trained_context=trained, kv_type=o.kv_type, flash_attn=flash,
        threads=o.threads or max(1, hw.cpu_cores), use_mmap=o.use_mmap, use_mlock=o.use_mlock,
        n_batch=o.n_batch, gpus=uses, ram=ram, shortfall_bytes=shortfall, notes=notes, refusal=refusal,
        parallel=max(1, o.parallel), drafts=o.drafts, experts_on_cpu=bool(o.experts_on_cpu and n_gpu and info.expert_bytes),
        devices=None if devices is None else [g.name for g, u in zip(gpus, uses) if u.layers or o.device],
    )
    keep_exact(plan, info)
    huge_pages(plan, hw, o)
    if _search_context and not refusal:
        plan.max_context = _largest_context(info, hw, o, plan)
    return plan


def huge_pages(plan: FitPlan, hw: Hardware, o: LoadOptions) -> None:
    """Read the weights into memory in huge pages, rather than map them from the file, where that is safe:
    a machine whose only device is the CPU (a GPU build keeps host weights in the GPU's own pinned
    buffers unmapped), Linux's transparent huge pages there for glibc's malloc (``Hardware.huge_page_weights``),
    and the whole load within ``HUGE_PAGES_RAM_SHARE`` of the available memory (unmapped weights cannot
    be paged back to their file, and the file's pages stay cached beside them for a while). A decode
    step reads every weight, and mapped from the file they sit in 4 KiB pages: on a 2-core AMD EPYC the
    starter decoded 1.07x (greedy) and 1.05x (sampled) faster from huge pages at depth 0, and 1.11x and
    1.01x at 4,096 (``bench/hugepages.py``: ``fireside serve`` with and without). The runner asks for them with
    ``glibc.malloc.hugetlb=1`` (``runtime/client.py``), which covers its KV cache too. ``o.huge_pages``
    False keeps the mapping; True still needs the machine's huge pages and a CPU-only load."""
    if o.huge_pages is False or not hw.huge_page_weights or plan.n_gpu_layers or not plan.fits:
        return
    if o.huge_pages is None and plan.ram.total_bytes > HUGE_PAGES_RAM_SHARE * hw.ram_available_bytes:
        return
    plan.use_mmap, plan.huge_pages = False, True
    plan.notes.append("weights read into memory in huge pages, not mapped from the file (faster decoding on the "
                      "CPU; --no-huge-pages maps them)")


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


def with_lane(plan: FitPlan, info: ModelInfo, kind: str, flash_attn: bool, start: int) -> FitPlan | None:
    """A CPU ``plan`` with a long-chat lane (``runner/lanes.py``): a second context of the model with an
    f16 KV cache for every slot and ``flash_attn`` as given, which sampled replies from ``start`` tokens
    of history decode in; its cache and compute buffer counted in RAM. None when they do not fit in the
    memory the plan had free."""
    kv = info.kv_bytes_per_token("f16") * plan.context * plan.parallel
    compute = _compute_bytes(info, plan.context, plan.n_batch, flash_attn, with_output=False)
    if plan.ram.total_bytes + kv + compute > plan.ram.available_bytes:
        return None
    plan = copy.deepcopy(plan)
    plan.lane, plan.lane_from, plan.lane_flash_attn = kind, start, flash_attn
    _beside(plan, False, 0, kv, compute)
    return plan


def with_attention(plan: FitPlan, info: ModelInfo, kv_type: str, flash_attn: bool) -> FitPlan | None:
    """A CPU ``plan`` with another KV cache type and flash attention (the kind ``runtime/attention.py``
    measured fastest), its cache re-sized for the type and its weights' kernels chosen again for it
    (``keep_exact``: a kind that is not exact takes the fast batched kernels back); None when the larger
    cache would not fit in the memory the plan had free (an f16 cache is nearly twice a q8_0 one).
    Counted conservatively: a draft model's cache is scaled with the model's."""
    ram = plan.ram
    kv = int(ram.kv_bytes * KV_TYPE_BYTES[kv_type] / KV_TYPE_BYTES.get(plan.kv_type, KV_TYPE_BYTES[kv_type]))
    if kv > ram.kv_bytes and ram.total_bytes - ram.kv_bytes + kv > ram.available_bytes:
        return None
    sized = replace(plan, kv_type=kv_type, flash_attn=flash_attn, ram=replace(ram, kv_bytes=kv), row_kernels=False,
                    inexact_weights=[], notes=[n for n in plan.notes if not n.endswith(ROW_KERNELS_NOTE)])
    keep_exact(sized, info)
    return sized


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


def _auto_experts(info: ModelInfo, hw: Hardware, o: LoadOptions, search_context: bool) -> FitPlan:
    """A MoE model's experts stay in host memory when that puts more of its layers on the GPU (llama-server's
    ``--cpu-moe``): most of a MoE layer's bytes are experts, of which a token uses a few, so the attention
    and the router of every layer on the GPU decode faster than some whole layers there and the rest on
    the CPU. A user's own layer count is left as it is."""
    plan = plan_fit(info, hw, replace(o, experts_on_cpu=False), _search_context=search_context)
    if not info.expert_bytes or o.n_gpu_layers is not None or not plan.gpus or plan.verdict == "full_gpu":
        return plan
    split = plan_fit(info, hw, replace(o, experts_on_cpu=True), _search_context=search_context)
    if not split.fits or split.n_gpu_layers <= plan.n_gpu_layers:
        return plan
    split.notes.append(f"the experts ({sum(info.expert_bytes) / 2**20:,.0f} MiB) stay in host memory, so "
                       f"{_repeating(split)} of {info.block_count} layers fit on the GPU instead of {_repeating(plan)}")
    return split


def _repeating(plan: FitPlan) -> int:
    """The repeating layers a plan puts on GPUs (its ``n_gpu_layers`` counts the output layer first)."""
    return max(0, min(plan.n_gpu_layers - 1, plan.n_layers))


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
