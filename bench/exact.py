"""What exact replies cost (issue 41): the starter on a q8_0 KV cache (the CPU default, ``exactness.kv_for``)
against f16, prompt evaluation and decoding at several depths, on 1 and 2 threads.

On an f16 cache llama.cpp's CPU flash attention evaluates prompt chunks of 64+ tokens with a tiled
kernel and splits a lone stream's cache between its threads for decoding past 512 cells; both are
faster on some shapes and both round differently from the row-at-a-time path that a q8_0 cache takes
for every shape. This measures the difference directly on llama.cpp (one context each, as Fireside
loads them, extra buffer types off on AMX CPUs), alternating the two caches, medians of ``--rounds``.

Prints a row per (depth, threads) and ends with
``exact: prompt q8_0/f16 P.PPx (worst W.WWx at depth D), decode q8_0/f16 T.TTx``
(geometric means over the rows). About 5 minutes on 2 cores with the default depths (each deeper one
adds several: the f16 and q8_0 prompts are evaluated cold every round).

    python bench/exact.py [--depths 512,2048] [--rounds 3]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

from fireside.engine.library.starter import starter_path
from fireside.engine.runner.process import model_params
from fireside.engine.runtime.healing import cpu_has_amx

TEXT = "The history of the ocean is long and complex, and its tides keep their own calendar. " * 400
Q8_0 = 8  # ggml's type id


def load(q8: bool, ctx: int):
    import llama_cpp

    with model_params(not cpu_has_amx()):
        return llama_cpp.Llama(model_path=str(starter_path()), n_ctx=ctx, n_batch=512, n_ubatch=512,
                               flash_attn=True, verbose=False, **({"type_k": Q8_0, "type_v": Q8_0} if q8 else {}))


def measure(llama, tokens: list[int], depth: int, threads: int, n_decode: int) -> tuple[float, float]:
    """Prompt tokens/s evaluating ``depth`` tokens cold, then decode tokens/s of ``n_decode`` more."""
    import llama_cpp as lc

    ctx = llama._ctx.ctx
    lc.llama_memory_clear(lc.llama_get_memory(ctx), True)
    lc.llama_set_n_threads(ctx, threads, threads)
    batch = lc.llama_batch_init(512, 0, 1)
    try:
        started = time.perf_counter()
        for start in range(0, depth, 512):
            _fill(batch, tokens[start:min(start + 512, depth)], start)
            assert lc.llama_decode(ctx, batch) == 0
        prompt = depth / (time.perf_counter() - started)
        started = time.perf_counter()
        for i in range(n_decode):
            _fill(batch, [tokens[depth + i]], depth + i)
            assert lc.llama_decode(ctx, batch) == 0
        return prompt, n_decode / (time.perf_counter() - started)
    finally:
        lc.llama_batch_free(batch)


def _fill(batch, tokens: list[int], pos: int) -> None:
    for i, t in enumerate(tokens):
        batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = t, pos + i, 1, i == len(tokens) - 1
        batch.seq_id[i][0] = 0
    batch.n_tokens = len(tokens)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="512,2048")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--decode", type=int, default=32, help="tokens decoded at each depth")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    ctx = max(depths) + args.decode + 16
    caches = {"f16": load(False, ctx), "q8_0": load(True, ctx)}
    tokens = caches["f16"].tokenize(TEXT.encode())
    assert len(tokens) >= ctx, "the text is too short for the deepest depth"
    rows = []
    print(f"{'depth':>6} {'threads':>7} {'prompt f16':>11} {'q8_0':>8} {'ratio':>6} {'decode f16':>11} {'q8_0':>8} {'ratio':>6}")
    for depth in depths:
        for threads in sorted({1, os.cpu_count() or 1}):
            got: dict[str, list[tuple[float, float]]] = {k: [] for k in caches}
            for _ in range(args.rounds):
                for name, llama in caches.items():
                    got[name].append(measure(llama, tokens, depth, threads, args.decode))
            med = {k: (statistics.median(p for p, _ in v), statistics.median(t for _, t in v)) for k, v in got.items()}
            pr, tr = med["q8_0"][0] / med["f16"][0], med["q8_0"][1] / med["f16"][1]
            rows.append((depth, pr, tr))
            print(f"{depth:6d} {threads:7d} {med['f16'][0]:11.1f} {med['q8_0'][0]:8.1f} {pr:6.2f} "
                  f"{med['f16'][1]:11.1f} {med['q8_0'][1]:8.1f} {tr:6.2f}", flush=True)
    worst = min(rows, key=lambda r: r[1])
    gm = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs))  # noqa: E731
    print(f"exact: prompt q8_0/f16 {gm([r[1] for r in rows]):.2f}x (worst {worst[1]:.2f}x at depth {worst[0]}), "
          f"decode q8_0/f16 {gm([r[2] for r in rows]):.2f}x")


if __name__ == "__main__":
    main()
