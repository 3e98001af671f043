"""The attention calibration's process: decode speed at a few depths with each KV cache and attention kind.

The runtime (``runtime/attention.py``: ``calibrate``) starts it by name, ``python -m
fireside.engine.runner.calibration MODEL THREADS DEPTHS N KINDS``, at background priority: llama.cpp may
crash, and a crash must not take the server with it. ``KINDS`` is a JSON object, kind -> [KV type,
flash attention], the exact kind first. It prints one line per kind, ``KIND {"DEPTH": tok/s, ...}``; a kind
llama.cpp refuses is left out.

Only the first kind's cache is filled by evaluating a prompt; each other kind takes that state converted to
its layout (``lanes.convert``, the long-chat lane's converter: q8_0 dequantized, the rotation undone, V
transposed for plain attention), since attention's cost depends on how many cells there are, not what they
hold. The starter's calibration took 18 s of two cores filling all three caches, 9 s so.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from .kvstate import restore, snapshot
from .lanes import GGML_F16, GGML_Q8_0, convert

Kinds = dict[str, tuple[str, bool]]  # kind -> (KV type, flash attention), the first the one filled by decoding


def contexts_for(model, kinds: Kinds, size: int, threads: int) -> dict:
    """A llama.cpp context of ``size`` cells per kind (a kind llama.cpp refuses is left out)."""
    import llama_cpp as lc

    contexts = {}
    for kind, (kv, flash) in kinds.items():
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch = size, 512, 512
        cp.n_threads = cp.n_threads_batch = threads
        cp.flash_attn_type = 1 if flash else 0
        cp.type_k = cp.type_v = GGML_Q8_0 if kv == "q8_0" else GGML_F16
        ctx = lc.llama_init_from_model(model, cp)
        if ctx:
            contexts[kind] = ctx
    return contexts


def fill(model, kinds: Kinds, contexts: dict, filled: dict[str, int], depth: int, decode: Callable) -> None:
    """Every kind's cache filled to ``depth`` cells: the first kind's by decoding, each other's with that
    state converted to its layout; by decoding where that fails (and said on stderr)."""
    import llama_cpp as lc

    state = None
    for kind in kinds:
        ctx = contexts.get(kind)
        if ctx is None or filled[kind] >= depth:
            continue
        if state is not None:
            mem = lc.llama_get_memory(ctx)
            lc.llama_memory_seq_rm(mem, 0, -1, -1)
            moved = convert(state, lc.llama_model_n_layer(model), lc.llama_model_n_head_kv(model), not kinds[kind][1])
            if moved is not None and restore(ctx, 0, moved):
                filled[kind] = depth
                continue
            lc.llama_memory_seq_rm(mem, 0, -1, -1)
            filled[kind] = 0
            print(f"fireside: the calibration's state did not convert to {kind}'s layout; filling it by decoding",
                  file=sys.stderr, flush=True)
        while filled[kind] < depth:
            count = min(512, depth - filled[kind])
            decode(ctx, filled[kind], count, False)
            filled[kind] += count
        if state is None:
            state = snapshot(ctx, 0)


def decoder(model, batch) -> Callable[[Any, int, int, bool], int]:
    """``decode(ctx, first, count, logits)``: ``count`` arbitrary tokens at positions from ``first`` (attention's
    cost depends on how many, not which) through ``batch``; llama.cpp's status."""
    import llama_cpp as lc

    n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(model))

    def decode(ctx, first: int, count: int, logits: bool) -> int:
        batch.n_tokens = count
        for i in range(count):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = (first + i) * 7919 % n_vocab, first + i, 1
            batch.seq_id[i][0], batch.logits[i] = 0, logits
        return lc.llama_decode(ctx, batch)

    return decode


ROUNDS = 5  # turns each kind takes at each depth


def summarize(rates: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
    """Each kind's figure at each depth from its rounds' decode rates (the kinds took turns within each
    round; the first kind is the exact one): the first kind's fastest round (another process only ever
    slows a round down), times the median of each kind's ratio to the first kind in the same round. A busy
    spell on a shared machine slows every kind of the rounds it spans alike and moves no ratio; one that
    falls on a single kind's turns moves those rounds' ratios, which the median leaves out. (Keeping each
    kind's best round, as this did before, let one kind's unlucky rounds decide: a calibration read the
    exact kind at 97 tok/s beside 135 for f16 flash attention, their usual 120 and 121, and its long-chat
    lane took the slowest kind from depth 0.)"""
    first = next(iter(rates))
    figures: dict[str, dict[str, float]] = {kind: {} for kind in rates}
    for depth, base_rounds in rates[first].items():
        base = max(base_rounds)
        for kind, by_depth in rates.items():
            ratios = [r / b for r, b in zip(by_depth.get(depth, []), base_rounds, strict=False) if b > 0]
            if ratios:
                figures[kind][str(depth)] = round(base * statistics.median(ratios), 2)
    return figures


def measure(model_path: str, threads: int, depths: list[int], n: int, kinds: Kinds, rounds: int = ROUNDS) -> None:
    """One model, a context per kind, one line per kind on stdout. Each context decodes a token first (its
    first step sets up what later ones reuse, and the first of all reads the weights in), then the kinds take
    turns, ``rounds`` times at each depth, and ``summarize`` makes figures of the rounds."""
    import llama_cpp as lc

    lc.llama_backend_init()
    mp = lc.llama_model_default_params()
    mp.n_gpu_layers, mp.use_extra_bufts = 0, False  # AMX kernels crash on batches (healing.py); the CPU's attention is measured
    model = lc.llama_model_load_from_file(model_path.encode(), mp)
    batch = lc.llama_batch_init(512, 0, 1)
    decode = decoder(model, batch)
    contexts = contexts_for(model, kinds, max(depths) + n + 64, threads)
    for ctx in contexts.values():  # warm-up, not timed
        decode(ctx, 0, 1, True)
        lc.llama_memory_seq_rm(lc.llama_get_memory(ctx), 0, -1, -1)
    rates: dict[str, dict[int, list[float]]] = {kind: {} for kind in contexts}
    filled = dict.fromkeys(contexts, 0)

    for depth in sorted(depths):
        fill(model, kinds, contexts, filled, depth, decode)
        for _ in range(rounds):
            for kind, ctx in contexts.items():
                started = time.perf_counter()
                for i in range(n):
                    decode(ctx, depth + i, 1, True)
                rates[kind].setdefault(depth, []).append(n / (time.perf_counter() - started))
                lc.llama_memory_seq_rm(lc.llama_get_memory(ctx), 0, depth, -1)  # the timed tokens leave
    figures = summarize(rates)
    for kind, ctx in contexts.items():
        print(kind, json.dumps(figures[kind]), flush=True)
        lc.llama_free(ctx)
    lc.llama_batch_free(batch)
    lc.llama_model_free(model)


if __name__ == "__main__":
    measure(sys.argv[1], int(sys.argv[2]), [int(d) for d in sys.argv[3].split(",")], int(sys.argv[4]),
            {k: (v[0], bool(v[1])) for k, v in json.loads(sys.argv[5]).items()})
