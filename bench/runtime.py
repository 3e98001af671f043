"""Decode speed and time to first token through Fireside's runtime (runner process, pipe, parsing)
beside plain in-process llama-cpp-python on the same model, threads, context and prompt.

    python bench/runtime.py [--model PATH] [--tokens 128] [--runs 5] [--ctx 2048]

Prints each run and the medians side by side with the ratio. The runner boundary should cost under
3% of decode speed. Both sides decode greedily with a fixed seed, so they do the same work.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from fireside.engine.library.starter import starter_path
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

PROMPT = "Write a detailed essay about the history of sailing ships, with many examples."


def bench_fireside(path: str, ctx: int, threads: int, tokens: int, runs: int) -> list[tuple[float, float]]:
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": tempfile.mkdtemp()}), resolver=lambda _: path, idle_ttl_s=0)
    rt.load("m", LoadOptions(context=ctx, threads=threads))
    results = []
    try:
        for i in range(runs + 1):
            # a new user message each run, so the prompt is evaluated afresh as in the other side
            req = ChatRequest(messages=[{"role": "user", "content": f"{i}. {PROMPT}"}],
                              sampling=Sampling(max_tokens=tokens, temperature=0, seed=1, repeat_penalty=1.0))
            done = list(rt.chat("m", req))[-1]
            if i:  # the first run warms caches
                results.append((done.usage.decode_tokens_per_s, done.usage.ttft_s))
    finally:
        rt.close()
    return results


def bench_plain(path: str, ctx: int, threads: int, tokens: int, runs: int) -> list[tuple[float, float]]:
    from llama_cpp import Llama

    llm = Llama(model_path=path, n_ctx=ctx, n_threads=threads, n_batch=512, verbose=False)
    results = []
    for i in range(runs + 1):
        # no reset: like Fireside's runner, llama-cpp-python reuses the prefix the runs share
        started = time.perf_counter()
        first = None
        n = 0
        for _ in llm.create_chat_completion(messages=[{"role": "user", "content": f"{i}. {PROMPT}"}],
                                            max_tokens=tokens, temperature=0, seed=1, repeat_penalty=1.0,
                                            stream=True):
            n += 1
            if first is None:
                first = time.perf_counter()
        end = time.perf_counter()
        if i and first:
            # the first streamed chunk is the role header; count decoded tokens after the first
            results.append(((n - 2) / (end - first) if n > 2 else 0.0, first - started))
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=str(starter_path() or ""))
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--ctx", type=int, default=2048)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    plain = bench_plain(a.model, a.ctx, a.threads, a.tokens, a.runs)
    fire = bench_fireside(a.model, a.ctx, a.threads, a.tokens, a.runs)
    print(f"model {a.model}\n{a.tokens} tokens x {a.runs} runs, ctx {a.ctx}, {a.threads} threads\n")
    print(f"{'run':>4} {'plain tok/s':>12} {'fireside tok/s':>15} {'plain TTFT ms':>14} {'fireside TTFT ms':>17}")
    for i, ((pt, pf), (ft, ff)) in enumerate(zip(plain, fire), 1):
        print(f"{i:>4} {pt:>12.1f} {ft:>15.1f} {pf * 1000:>14.0f} {ff * 1000:>17.0f}")
    mp, mf = statistics.median(t for t, _ in plain), statistics.median(t for t, _ in fire)
    tp, tf = statistics.median(f for _, f in plain), statistics.median(f for _, f in fire)
    print(f"\nmedian decode: plain {mp:.1f} tok/s, fireside {mf:.1f} tok/s, ratio {mf / mp:.3f} "
          f"({(1 - mf / mp) * 100:+.1f}% cost)")
    print(f"median TTFT:   plain {tp * 1000:.0f} ms, fireside {tf * 1000:.0f} ms, ratio {tf / tp:.3f}")


if __name__ == "__main__":
    main()
