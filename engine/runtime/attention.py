"""Attention chosen by measurement: which KV cache and attention kernel decode fastest on this machine.

llama.cpp offers, on the CPU, flash attention over a quantized (q8_0) KV cache (the planner's default:
replies are exact, ``kv_for``), flash attention over an f16 cache, and plain attention (``mul_mat``
over the whole stream, which needs an f16 cache). Which decodes fastest deep in a long chat depends
on the CPU: on one 2-core Xeon plain f16 attention decoded 4,000 tokens in at 1.6x the exact kind, on
a 2-core EPYC f16 flash attention led from about 2,000 tokens, and on others the exact kind leads
throughout. So a short calibration, run in a process of its own in the background after a model
architecture's first load on a machine (``calibrate``), decodes a few tokens at a few depths with each
kind, and later loads use the figures. Only the exact kind's cache is filled by evaluating a prompt;
the others take its state converted to their layout (``runner/calibration.py``, the process it runs
in): the starter's calibration takes 9 s of two cores where filling all three took 18.

Exactness: only q8_0 with flash attention computes a token's row the same way whatever shares its
step (issue 41: ``runner/batch.py``), and a greedy or seeded reply must be the same however busy the
machine. So the figures choose per kind of request, not per load: greedy and seeded replies always
decode with the exact kind; sampled replies without a seed (random anyway; the app's chats) decode,
from the depth where another kind is ``LANE_MARGIN`` faster (``lane``: each kind's time per token fitted
as a line over depth, since attention's cost grows with the history and the rest does not; of two such
kinds, the first ahead, unless the other is clearly faster at the deepest measured depth), in a
second context of the model with that kind (``runner/lanes.py``; ``planner.with_lane`` counts its
cache). Where that second cache does not fit, every reply keeps the exact kind. A load that cannot
be exact anyway (heads a q8_0 block cannot hold) takes the faster of the other kinds for all its
replies (``choose``: the fastest at the deepest measured depth, by ``MARGIN``).

Remembered per machine like the healing rungs (``healing.py``): ``attention.json`` in the data
folder, keyed by the llama.cpp build, the CPU and its flags, the GPU devices, the thread count and the
model's architecture and shape, with the ``METHOD`` that measured them (a load measures again after
the method changes). ``fireside hw`` and ``fireside info`` show the figures and the choice. The kinds
take turns, five rounds at each depth, and a kind's figure is its median ratio to the exact kind in the
same round (``runner/calibration.summarize``): a busy spell that slows one kind's turns decides nothing.

Threading: ``Choices`` may be used from any thread (one lock, whole-file rewrites); ``calibrate``
blocks for the measurement (run it on a thread of its own).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from ..fsutil import atomic_write, read_json_object
from ..models import FitPlan, Hardware, LoadOptions, ModelInfo, hardware, kv_fits, with_attention, with_lane
from .healing import _cpu_identity

log = logging.getLogger(__name__)

KINDS = {"q8_0+fa": ("q8_0", True), "f16+fa": ("f16", True), "f16": ("f16", False)}  # kv type, flash attention
EXACT = "q8_0+fa"  # the kind whose replies are the same alone, batched and drafted (the default)
MARGIN = 1.15  # a kind that is not exact must decode this much faster than the exact one to be chosen
LANE_MARGIN = 1.05  # ... and this much to take sampled replies (they were promised nothing; the fit is noisy)
DEPTHS = (0, 1024)  # tokens of history the decode is measured on top of
N_DECODE = 8  # tokens decoded (and timed) at each depth
TIMEOUT_S = 300.0
METHOD = 2  # how the figures were measured: entries of an older method are measured again (``Choices.get``)


def key(hw: Hardware, architecture: str, shape: str, threads: int) -> str:
    """A key for (llama.cpp build, CPU and its flags, GPU devices, threads, model architecture and shape)."""
    parts = [hw.llama_cpp_version, hw.system_info, _cpu_identity(), str(threads), architecture, shape,
             ";".join(f"{d.backend}/{d.name}" for d in hw.devices if d.is_gpu)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def model_key(hw: Hardware, info, threads: int) -> str:
    """``key`` for a model (a ``ModelInfo``): its architecture and the shape of its attention."""
    shape = f"{info.block_count}x{info.embedding_length}/{info.head_count}:{info.key_length}"
    return key(hw, info.architecture, shape, threads)


def ms_per_token(figures: dict[str, float]) -> tuple[float, float] | None:
    """A kind's decode time as ``a + b * depth`` milliseconds per token, fitted (least squares) to its
    measured speeds: attention reads every cell of the history once per token, so its cost grows
    with the depth and the rest of a step does not. None with fewer than two depths."""
    points = sorted((int(d), 1000.0 / v) for d, v in figures.items() if v > 0)
    if len({d for d, _ in points}) < 2:
        return None
    n = len(points)
    mean_d, mean_t = sum(d for d, _ in points) / n, sum(t for _, t in points) / n
    b = (sum((d - mean_d) * (t - mean_t) for d, t in points) / sum((d - mean_d) ** 2 for d, _ in points))
    return mean_t - b * mean_d, max(b, 0.0)


def lane(figures: dict[str, dict[str, float]], context: int) -> tuple[str, int] | None:
    """The kind requests that need not be exact decode with, and from which depth (tokens of history):
    of the kinds that are not exact and, by ``ms_per_token``, decode ``LANE_MARGIN`` faster than the exact
    one from some depth within ``context`` (rounded up to 256 tokens), the one that does so first, unless
    another is fitted ``LANE_MARGIN`` faster at the deepest measured depth (or ``context``, if shallower).
    None when none is ahead.

    A reply that is greedy or seeded must come out the same whatever else runs (issue 41), and only
    the exact kind gives that; a sampled reply without a seed is random anyway, so it may take the
    faster attention (``runner/lanes.py``) and a long chat is not slowed for a promise it was not made."""
    if EXACT not in figures or (exact := ms_per_token(figures[EXACT])) is None:
        return None
    ahead: list[tuple[float, int, str]] = []  # (ms per token deep in, the depth it takes over from, kind)
    deep = min(context, max(int(d) for f in figures.values() for d in f))
    for kind, figs in figures.items():
        if kind == EXACT or kind not in KINDS or (fit := ms_per_token(figs)) is None:
            continue
        # exact(d) >= LANE_MARGIN * kind(d), with each a + b * d
        gain, start = exact[1] - LANE_MARGIN * fit[1], LANE_MARGIN * fit[0] - exact[0]
        if gain < 0 or (gain == 0 and start > 0):
            continue  # never ahead, or ahead only near the start and behind from some depth on
        depth = 0 if start <= 0 else math.ceil(start / gain / 256) * 256
        if depth < context:
            ahead.append((fit[0] + fit[1] * deep, depth, kind))
    if not ahead:
        return None
    first, fastest = min(ahead, key=lambda a: a[1]), min(ahead)
    # the kind that overtakes first, unless another is LANE_MARGIN faster deep in (a closer call is noise)
    _, depth, kind = fastest if fastest[0] * LANE_MARGIN <= first[0] else first
    return kind, depth


def choose(figures: dict[str, dict[str, float]]) -> str:
    """The kind that decodes fastest at the deepest measured depth (a long chat is where it is felt);
    a kind that is not exact only when it beats the exact one by ``MARGIN``."""
    deepest = max(int(d) for f in figures.values() for d in f)
    speed = {k: f.get(str(deepest), 0.0) for k, f in figures.items() if k in KINDS}
    best = max(speed, key=speed.__getitem__)
    if best != EXACT and EXACT in speed and speed[best] < MARGIN * speed[EXACT]:
        return EXACT
    return best


class Choices:
    """The measured figures and the chosen kind, per key, in one JSON file."""

    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict]:
        return read_json_object(self.path, log)

    def get(self, k: str) -> dict | None:
        """The remembered entry (``kind``, ``figures``, ``model``, ``since``), or None: not measured yet, or
        measured by an older ``METHOD`` (method 1 kept each kind's best round, and one kind's unlucky rounds
        could choose a user's lane for good: ``runner/calibration.summarize``), so the next load measures again."""
        with self._lock:
            entry = self._read().get(k)
        return entry if _current(entry) else None

    def for_model(self, info: ModelInfo, threads: int | None = None) -> dict | None:
        """``get`` for a model on this machine decoding on ``threads`` (None: every core, as a load takes)."""
        hw = hardware.detect()
        return self.get(model_key(hw, info, threads or hw.cpu_cores))

    def remember(self, k: str, figures: dict[str, dict[str, float]], model: str) -> str:
        kind = choose(figures)
        with self._lock:
            data = self._read()
            data[k] = {"kind": kind, "figures": figures, "model": model, "since": time.time(), "method": METHOD}
            atomic_write(self.path, json.dumps(data, indent=2))
        return kind

    def entries(self) -> list[dict]:
        """The entries loads use (``get``'s), for ``fireside hw``."""
        with self._lock:
            return [{"key": k, **v} for k, v in self._read().items() if _current(v)]


def _current(entry: object) -> bool:
    return isinstance(entry, dict) and entry.get("kind") in KINDS and entry.get("method") == METHOD


def figures_text(entry: dict) -> str:
    """"decode tok/s at depth 0/1024: q8_0+fa 95/50, f16+fa 90/31, f16 88/45"."""
    figs = entry.get("figures", {})
    depths = sorted({int(d) for f in figs.values() for d in f})
    shown = ", ".join(f"{k} " + "/".join(f"{f.get(str(d), 0):.0f}" for d in depths) for k, f in figs.items())
    return f"decode tok/s at depth {'/'.join(map(str, depths))}: {shown}"


def describe(entry: dict, split: tuple[str, int] | None = None) -> str:
    """"q8_0+fa (decode tok/s at depth 0/1024: ...)"; with a lane (``split``, as ``lane`` answers),
    "q8_0+fa for greedy and seeded replies, f16 for sampled ones from 2,048 tokens of history (...)"."""
    if split is not None:
        kind, start = split
        return f"{EXACT} for greedy and seeded replies, {kind} for sampled ones from {start:,} tokens of history ({figures_text(entry)})"
    note = "" if entry["kind"] == EXACT else "; batched and drafted replies may differ from one decoded alone"
    return f"{entry['kind']} ({figures_text(entry)}){note}"


def leaves_choice(opts: LoadOptions, plan: FitPlan, embedding: bool = False) -> bool:
    """Whether a load leaves its attention to Fireside: KV type auto, flash attention unset, on the CPU
    (an embedder decodes nothing: its attention is never measured)."""
    return not embedding and opts.kv_type == "auto" and opts.flash_attn is None and plan.n_gpu_layers == 0


def planned(plan: FitPlan, info: ModelInfo, opts: LoadOptions, entry: dict | None) -> FitPlan:
    """What a load of ``plan`` takes on this machine, given its remembered ``entry`` (None: not measured
    yet): the load itself, ``fireside info`` and the app's load dialog all ask this, so none of them
    shows memory or a choice the load would not take."""
    return applied(plan, info, entry) if entry is not None and leaves_choice(opts, plan) else plan


def applied(plan: FitPlan, info: ModelInfo, entry: dict) -> FitPlan:
    """The CPU ``plan`` a load that left the KV type and flash attention to Fireside takes, given this
    machine's remembered ``entry``, with a note saying what was chosen. An exact plan stays exact: with a
    long-chat lane (``lane``, ``planner.with_lane``) when a kind that is not exact decodes faster from
    some depth within the context and its cache fits, else as it is. A plan that cannot be exact (heads a
    q8_0 block cannot hold) takes the remembered kind (``choose``) where its cache fits."""
    if (plan.kv_type, plan.flash_attn) == KINDS[EXACT]:
        exact = {**entry, "kind": EXACT}
        kind_start = lane(entry.get("figures", {}), plan.context)
        if kind_start is None:
            return replace(plan, notes=[*plan.notes, f"attention: {describe(exact)}, measured on this machine"])
        kind, start = kind_start
        laned = with_lane(plan, info, kind, KINDS[kind][1], start)
        if laned is None:
            note = (f"attention: {kind} measured faster for sampled replies from {start:,} tokens of history, but "
                    f"its second KV cache does not fit in free memory: every reply decodes with {EXACT}")
            return replace(plan, notes=[*plan.notes, note])
        laned.notes.append(f"attention: {describe(exact, kind_start)}, measured on this machine")
        return laned
    kv, flash = KINDS[entry["kind"]]
    if kv != "f16" and not kv_fits(info, kv):
        return plan
    sized = with_attention(plan, info, kv, flash)
    if sized is None:
        note = f"attention: {entry['kind']} measured faster here, but its {kv} KV cache does not fit in free memory"
        return replace(plan, notes=[*plan.notes, note])
    sized.notes.append(f"attention: {describe(entry)}, measured on this machine")
    return sized


def calibrate(model_path: str, threads: int, depths: tuple[int, ...] = DEPTHS, n: int = N_DECODE) -> dict:
    """Measure every kind in a process of its own (llama.cpp may crash; this process must not), at
    background priority. Returns {kind: {depth: decode tok/s}}; a kind llama.cpp refused is left out."""
    kinds = {EXACT: KINDS[EXACT], **KINDS}  # the exact kind first: its cache is the one filled by decoding
    cmd = [sys.executable, "-m", "fireside.engine.runner.calibration", model_path, str(threads),
           ",".join(map(str, depths)), str(n), json.dumps(kinds)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S,
                         preexec_fn=(lambda: os.nice(10)) if hasattr(os, "nice") else None)
    figures = {}
    for line in out.stdout.splitlines():
        kind, _, rest = line.partition(" ")
        if kind in KINDS and rest:
            figures[kind] = json.loads(rest)
    if not figures:
        raise RuntimeError(f"the attention calibration measured nothing (exit {out.returncode}): "
                           f"{out.stderr.strip()[-300:]}")
    return figures
