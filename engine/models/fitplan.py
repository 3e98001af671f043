"""The fit planner's values: what a load asks for (``LoadOptions``), what the planner answers (``FitPlan``,
with a ``DeviceUse`` per device) and its verdicts in words.

A ``FitPlan`` is a plain value the runtime loads with (``plan.llama_kwargs()``) and sets beside what
llama.cpp reports allocating (``plan.compare(...)``, ``plan.compare_devices(...)``); ``planner.py``
makes one, ``exactness.py`` decides its attention and kernels.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from .inspection import EXPERTS_PATTERN

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
# and its numerics do not depend on the other slots (see runner/kvstreams.py), which keeps seeds honest.
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
    kv_type: str = "auto"  # "auto": EXACT_KV where replies can be exact (exactness.kv_for), else f16
    flash_attn: bool | None = None
    threads: int | None = None
    use_mmap: bool = True
    use_mlock: bool = False
    huge_pages: bool | None = None  # weights read into huge pages, not mapped (None: where planner.huge_pages says)
    n_batch: int = 512
    parallel: int | None = None  # slots: requests decoded together (None: DEFAULT_PARALLEL)
    mmproj: str | None = None  # the vision projector's path (None: the one the library pairs with the model, if any)
    drafts: bool = False  # speculative decoding's prompt-lookup drafts (runner/drafts.py): off until
    # bench/speculative.py shows they pay; on, short replies ran about 11% slower (tests/server/test_conformance.py)
    draft: str | None = None  # a draft model (a library id or a .gguf path) with the same vocabulary (draftmodel.py)
    device: str | None = None  # offload to this device alone (``Hardware.named``); the only way onto a software one
    gpu_budget_gib: float | None = None  # the most device memory to plan for on each device (FIRESIDE_GPU_BUDGET_GIB)
    experts_on_cpu: bool | None = None  # a MoE model's experts kept in host memory (None: when more layers fit so)
    with_devices: tuple[str, ...] | None = None  # paired devices that lend memory (rpc/): layers placed there too
    ram_budget_gib: float | None = None  # the most host memory to plan for (FIRESIDE_RAM_BUDGET_GIB)

    @classmethod
    def from_dict(cls, d: dict | None) -> LoadOptions:
        d = {k: v for k, v in (d or {}).items() if k in cls.__dataclass_fields__ and v is not None}
        if "tensor_split" in d:
            d["tensor_split"] = tuple(d["tensor_split"])
        if "with_devices" in d:
            d["with_devices"] = device_names(d["with_devices"])
        return cls(**d)

    def within(self, settings) -> LoadOptions:
        """These options under the settings' GPU and RAM budgets (``FIRESIDE_GPU_BUDGET_GIB``,
        ``FIRESIDE_RAM_BUDGET_GIB``) where they set none of their own."""
        gpu = self.gpu_budget_gib if self.gpu_budget_gib is not None else settings.gpu_budget_gib
        ram = self.ram_budget_gib if self.ram_budget_gib is not None else settings.ram_budget_gib
        return replace(self, gpu_budget_gib=gpu, ram_budget_gib=ram)


def device_names(value) -> tuple[str, ...]:
    """Paired devices' names as ``with_devices`` keeps them: from ``"alpha,beta"`` (the CLI's, the API's) or a list."""
    return tuple(n.strip() for n in value.split(",") if n.strip()) if isinstance(value, str) else tuple(value)


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
    row_kernels: bool = False  # K-quant weights multiplied by the one-row kernels only (exactness.keep_exact)
    inexact_weights: list[str] = field(default_factory=list)  # weight types no switch makes batch-invariant
    experts_on_cpu: bool = False  # a MoE model's experts stay in host memory while its layers are offloaded
    rpc: dict[str, str] = field(default_factory=dict)  # a lending device's name in ``devices`` -> its tunnel's host:port
    rpc_module: str = ""  # llama.cpp's RPC backend built by Fireside (rpc/build.py); "" when built in
    lane: str = ""  # the long-chat lane's attention kind (runner/lanes.py, planner.with_lane); "" for none
    lane_from: int = 0  # and the depth (tokens of history) from which sampled replies decode in it
    lane_flash_attn: bool = False  # and whether its f16 cache is attended with flash attention
    huge_pages: bool = False  # the weights are read into memory in huge pages (use_mmap off; planner.huge_pages)

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
        if self.rpc:  # the runner takes this one: lending devices' tunnels, registered before the load
            kw["rpc"] = {"endpoints": dict(self.rpc), "module": self.rpc_module}
            kw["op_offload"] = False  # a prompt's products on a device far away would send it the CPU's weights
        if self.kv_type != "f16":
            kw["type_k"] = kw["type_v"] = _GGML_KV_TYPE[self.kv_type]
        if self.experts_on_cpu and self.n_gpu_layers:  # the runner takes this one: tensor_buft_overrides
            kw["host_tensors"] = [EXPERTS_PATTERN]
        if self.row_kernels:  # the runner takes both: a model param and ggml's GGML_CPU_TILED_MM switch
            kw["use_extra_bufts"] = kw["tiled_mm"] = False
        if self.lane:  # the runner takes this one: a second context, its own Llama() has none
            kw["lane"] = {"kind": self.lane, "from": self.lane_from, "flash_attn": self.lane_flash_attn}
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
