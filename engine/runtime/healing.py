"""Self-healing loads: when llama.cpp kills a runner, retry with a safer configuration and remember it.

Some llama.cpp builds crash on some machines: the AMX matrix kernels of a build made for a Sapphire
Rapids Xeon segfault on the first batch of more than one token (llama.cpp #20824), a GPU driver
aborts, a flash-attention kernel faults. No Python ``try`` catches that, but the runner is a separate
process, so the runtime sees it die by a signal and can try again. The ladder below is walked one rung
at a time, each rung keeping the ones before it:

1. ``extra_bufts``: no extra buffer types (no AMX or CPU-repack matrix kernels),
2. ``flash_attn``: flash attention off,
3. ``gpu``: every layer on the CPU,
4. ``batch``: a smaller batch.

A rung that changes nothing for this load (flash attention already off, no GPU layers) is skipped.
A load with layers on paired devices (RPC) that dies is first tried once more as it was: a network
hiccup at the connect kills it the same way a kernel does, and is not worth a workaround.
The runner decodes a few real tokens as a warm-up inside its load, so a crash shows up there, not on
the user's first message. What survived is kept in ``workarounds.json`` in the data folder, keyed by
the llama.cpp build, the CPU and its flags, the GPU devices and the model file, so the next load goes
straight to it. ``fireside hw`` and the Settings page list these workarounds and can clear them.

Threading: ``Workarounds`` may be used from any thread (one lock, whole-file rewrites).
"""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..fsutil import atomic_write, read_json_object
from ..models import FitPlan, Hardware

log = logging.getLogger(__name__)

#: Signals that mean "llama.cpp itself crashed", as opposed to being killed by the user or the OOM killer.
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGABRT, signal.SIGFPE})
SMALL_BATCH = 64


@dataclass(frozen=True)
class Rung:
    name: str
    words: str  # what changed, as the user reads it after "Fireside turned ... "


LADDER = (
    Rung("extra_bufts", "the AMX/repack matrix kernels (extra buffer types) off"),
    Rung("flash_attn", "flash attention off"),
    Rung("gpu", "the GPU off (every layer on the CPU)"),
    Rung("batch", f"a smaller batch ({SMALL_BATCH} tokens)"),
)
_WORDS = {r.name: r.words for r in LADDER}


def rung_matters(name: str, plan: FitPlan) -> bool:
    """Whether turning rung ``name`` on changes this plan's load."""
    return {"extra_bufts": True, "flash_attn": plan.flash_attn, "gpu": plan.n_gpu_layers > 0,
            "batch": plan.n_batch > SMALL_BATCH}[name]


def apply(plan: FitPlan, rungs: tuple[str, ...]) -> FitPlan:
    """``plan`` with the given rungs of the ladder applied."""
    if "flash_attn" in rungs:  # a quantized V cache needs flash attention: back to f16 with it
        plan = replace(plan, flash_attn=False, kv_type="f16", row_kernels=False)  # not exact now: fast kernels
    if "gpu" in rungs:
        plan = replace(plan, n_gpu_layers=0, tensor_split=[])
    if "batch" in rungs:
        plan = replace(plan, n_batch=min(plan.n_batch, SMALL_BATCH))
    return plan


def load_kwargs(plan: FitPlan, rungs: tuple[str, ...]) -> dict[str, object]:
    """The runner's load arguments for ``plan`` with ``rungs`` applied."""
    kwargs = apply(plan, rungs).llama_kwargs()
    if "extra_bufts" in rungs:
        kwargs["use_extra_bufts"] = False  # a model param, not a Llama() keyword: the runner sets it
    return kwargs


def next_rungs(plan: FitPlan, rungs: tuple[str, ...]) -> tuple[str, ...] | None:
    """The next safer configuration after ``rungs``, or None when the ladder is used up."""
    for rung in LADDER:
        if rung.name not in rungs and rung_matters(rung.name, apply(plan, rungs)):
            return (*rungs, rung.name)
    return None


def describe(rungs: tuple[str, ...]) -> str:
    """The workaround in words: "flash attention off and the GPU off (...)"."""
    words = [_WORDS[r] for r in rungs]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def layers_words(layers: int) -> str:
    """The GPU-layers workaround in words."""
    return "every layer on the CPU" if layers == 0 else f"at most {layers} GPU layers"


def _entry_words(entry: dict) -> str:
    words = [describe(tuple(entry["rungs"]))] if entry.get("rungs") else []
    if entry.get("gpu_layers") is not None:
        words.append(f"{layers_words(entry['gpu_layers'])} (the device refused more)")
    return " and ".join(words)


def is_crash(signal_number: int | None) -> bool:
    return signal_number is not None and signal_number in CRASH_SIGNALS


def signal_name(signal_number: int) -> str:
    try:
        return signal.Signals(signal_number).name
    except ValueError:
        return f"signal {signal_number}"


def machine_key(hw: Hardware, model_path: Path) -> str:
    """A key for (llama.cpp build, CPU and its flags, GPU devices, model file)."""
    try:
        st = model_path.stat()
        file_id = f"{model_path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        file_id = str(model_path)
    parts = [hw.llama_cpp_version, hw.system_info, hw.built_for, _cpu_identity(),
             ";".join(f"{d.backend}/{d.name}/{d.description}" for d in hw.devices if d.is_gpu), file_id]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def cpu_has_amx() -> bool:
    """Whether this CPU has the AMX units whose llama.cpp kernels crash on multi-token batches (#20824)."""
    return "amx_int8" in _cpu_identity()


def _cpu_identity() -> str:
    """The CPU's model name and feature flags (Linux), or the platform's processor string."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
        if key.strip() == "flags":
            break
    return f"{fields.get('model name', '')}|{fields.get('flags', '')}"


class Workarounds:
    """The configurations that survived a crash, per machine and model, in one JSON file."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict]:
        return read_json_object(self.path, log)

    def _write(self, data: dict[str, dict]) -> None:
        atomic_write(self.path, json.dumps(data, indent=2))

    def get(self, key: str) -> tuple[str, ...]:
        with self._lock:
            entry = self._read().get(key) or {}
        rungs = tuple(r for r in entry.get("rungs", []) if r in _WORDS)
        return rungs

    def remember(self, key: str, rungs: tuple[str, ...], model: str, reason: str) -> None:
        with self._lock:
            data = self._read()
            data[key] = {**(data.get(key) or {}), "rungs": list(rungs), "model": model, "reason": reason,
                         "since": time.time(), "llama_cpp": _llama_version()}
            self._write(data)

    def gpu_layers(self, key: str) -> int | None:
        """The most GPU layers that loaded after the device refused more (``remember_layers``), if any."""
        with self._lock:
            entry = self._read().get(key) or {}
        layers = entry.get("gpu_layers")
        return layers if isinstance(layers, int) and layers >= 0 else None

    def remember_layers(self, key: str, layers: int, model: str, reason: str) -> None:
        """A load of ``model`` failed on the device and loaded with ``layers`` GPU layers: later loads take at
        most that many (the GPU rung for a load that fails without a crash: out of device memory)."""
        with self._lock:
            data = self._read()
            entry = data.get(key) or {"rungs": []}
            data[key] = {**entry, "gpu_layers": layers, "model": model, "layers_reason": reason,
                         "since": time.time(), "llama_cpp": _llama_version()}
            self._write(data)

    def entries(self) -> list[dict]:
        """Every remembered workaround, for ``fireside hw`` and the Settings page."""
        with self._lock:
            data = self._read()
        return [{"key": k, **v, "description": _entry_words(v)}
                for k, v in data.items() if v.get("rungs") or v.get("gpu_layers") is not None]

    def clear(self) -> int:
        """Forget every workaround; the next load tries the full configuration again. Returns how many."""
        with self._lock:
            n = len(self._read())
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        return n


def _llama_version() -> str:
    try:
        import llama_cpp

        return getattr(llama_cpp, "__version__", "")
    except ImportError:
        return ""
