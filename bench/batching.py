"""Continuous batching against llama-server: Fireside's API server beside llama-server on one model.

Starts llama-server (built from the llama.cpp that llama-cpp-python vendors, so both run the same
kernels; pass its path) and ``fireside serve`` on the starter model (SmolLM2-135M), each a process of
its own, as users run them (so neither server shares an interpreter, and its lock, with the client),
with the same threads and ``--slots`` slots of ``--ctx`` tokens each (llama-server: ``-c slots*ctx -np
slots``; Fireside: ``--ctx ctx --parallel slots``), and measures both, alternating which goes first each round, with the same client (``HttpTarget``) and the
same greedy sampling: one stream's time per output token, the aggregate output tokens/s of 4 and 8
concurrent streams with their time-to-first-token p50/p99, and the time to evaluate a fresh prompt of
about 4,000 tokens. Prints medians over the rounds and Fireside/llama-server ratios.

    python bench/batching.py --llama-server /path/to/llama-server [--rounds 2] [--tokens 48]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from fireside.engine.bench.targets import HttpTarget, RequestResult, free_port, started
from fireside.engine.library.starter import starter_path
from fireside.engine.runtime.healing import cpu_has_amx

TOPICS = ["a lighthouse keeper", "a dragon who bakes bread", "the first train to the coast", "a lost violin",
          "a city under the sea", "two rival gardeners", "a robot learning to paint", "the last ferry home"]
WORDS = ("river stone lamp harbour winter letter garden bridge candle market forest window silver engine "
         "ladder meadow compass thunder orchard lantern").split()


class LlamaServerTarget(HttpTarget):
    """llama-server, asked to sample as Fireside does by default (repeat penalty 1.1 over 64 tokens)."""

    def body(self, prompt: str, max_tokens: int, seed: int | None = None) -> dict:
        return {**super().body(prompt, max_tokens, seed), "repeat_penalty": 1.1, "repeat_last_n": 64}


def start_llama_server(binary: str, threads: int, ctx: int, slots: int, no_repack: bool) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [binary, "-m", str(starter_path()), "-t", str(threads), "-c", str(ctx * slots), "-np", str(slots),
           "--host", "127.0.0.1", "--port", str(port), "--no-webui", *(["--no-repack"] if no_repack else [])]
    return started(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port, "/health")


def start_fireside(home: str, threads: int, ctx: int, slots: int, extra: list[str] | None = None) -> tuple[subprocess.Popen, str]:
    """``fireside serve`` with the starter loaded before it listens, kept loaded for the whole run
    (``extra``: more of serve's flags, such as ``--drafts``)."""
    port = free_port()
    cmd = [sys.executable, "-m", "fireside.engine", "serve", "--port", str(port), "--load", "starter",
           "--keep-alive", "-1", "--ctx", str(ctx), "--parallel", str(slots), "--threads", str(threads), *(extra or [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "FIRESIDE_HOME": home})
    return started(proc, port, "/v1/models")


def tpot(r: RequestResult) -> float:
    return (r.latency_s - r.ttft_s) / max(r.completion_tokens - 1, 1)


def one_stream(target: HttpTarget, tokens: int, nonce: int) -> float:
    r = target.send(f"({nonce}) Write a long story about {TOPICS[nonce % len(TOPICS)]}.", tokens)
    assert r.ok, r.error
    return tpot(r)


def concurrent(target: HttpTarget, n: int, tokens: int, nonce: int) -> tuple[float, list[float]]:
    """Aggregate output tokens/s of n streams started together, and their times to first token."""
    prompts = [f"({nonce}.{i}) Write a long story about {TOPICS[i % len(TOPICS)]}." for i in range(n)]
    started = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        results = list(pool.map(lambda p: target.send(p, tokens), prompts))
    wall = time.perf_counter() - started
    assert all(r.ok for r in results), [r.error for r in results if not r.ok]
    return sum(r.completion_tokens for r in results) / wall, [r.ttft_s for r in results]


def long_prompt(target: HttpTarget, n_words: int, nonce: int) -> tuple[float, int]:
    """Seconds to evaluate a fresh prompt (a one-token reply, not streamed: its first token may be
    the end of the reply, which shows no text) and its size in tokens."""
    rng = random.Random(nonce)
    text = f"Note {nonce}: " + " ".join(rng.choice(WORDS) for _ in range(n_words)) + "\nSummarise the note."
    body = {**target.body(text, 1), "stream": False}
    body.pop("stream_options", None)
    started = time.perf_counter()
    r = target.client.post(target.label, json=body)
    seconds = time.perf_counter() - started
    r.raise_for_status()
    return seconds, r.json()["usage"]["prompt_tokens"]


def measure(target: HttpTarget, args: argparse.Namespace, rnd: int) -> dict[str, float]:
    out: dict[str, float] = {"1 stream TPOT ms": one_stream(target, args.tokens, 1000 + rnd) * 1000}
    for n in (4, 8):
        agg, ttfts = concurrent(target, n, args.tokens, 2000 + 10 * rnd + n)
        out[f"{n} streams tok/s"] = agg
        out[f"{n} streams TTFT p50 ms"] = statistics.median(ttfts) * 1000
        out[f"{n} streams TTFT p99 ms"] = sorted(ttfts)[-1] * 1000  # p99 of 4-8 requests: the slowest
    seconds, n_tokens = long_prompt(target, args.prompt_words, 3000 + rnd)
    out["fresh prompt s"] = seconds
    out["fresh prompt tok/s"] = n_tokens / seconds
    out["fresh prompt tokens"] = n_tokens
    return out


HIGHER_IS_BETTER = ("tok/s",)


def report(results: dict[str, list[dict[str, float]]], rounds: int) -> None:
    fs, ls = ({k: statistics.median(r[k] for r in v) for k in v[0]} for v in (results["fireside"], results["llama-server"]))
    print(f"{'metric':24} {'Fireside':>10} {'llama-server':>13} {'ratio':>7}   (medians of {rounds} rounds)")
    for key in fs:
        ratio = fs[key] / ls[key] if ls[key] else float("nan")
        note = "" if key.endswith("tokens") else ("  higher is better" if any(h in key for h in HIGHER_IS_BETTER)
                                                  else "  lower is better")
        print(f"{key:24} {fs[key]:10.1f} {ls[key]:13.1f} {ratio:7.3f}{note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-server", required=True, help="path to a llama-server binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ctx", type=int, default=4608, help="context of each slot (holds the long prompt)")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=48, help="output tokens per stream")
    ap.add_argument("--prompt-words", type=int, default=3900, help="words in the fresh long prompt (~1 token each)")
    ap.add_argument("--rounds", type=int, default=2)
    # on an AMX CPU Fireside's load heals to extra buffer types off (healing.py): llama-server runs the same way
    ap.add_argument("--no-repack", action=argparse.BooleanOptionalAction, default=cpu_has_amx(),
                    help="llama-server without repacked/AMX kernels (default: on where the CPU has AMX)")
    args = ap.parse_args()
    print(f"llama-server {'with --no-repack (AMX CPU)' if args.no_repack else 'with its default kernels'}")
    with tempfile.TemporaryDirectory() as home:
        procs = []
        try:
            procs.append(start_llama_server(args.llama_server, args.threads, args.ctx, args.slots, args.no_repack))
            procs.append(start_fireside(home, args.threads, args.ctx, args.slots))
            (_, ls_url), (_, fs_url) = procs
            targets = {"fireside": HttpTarget(fs_url, "starter", endpoint="chat", exact_length=False),
                       "llama-server": LlamaServerTarget(ls_url, "starter", endpoint="chat", exact_length=False)}
            for t in targets.values():
                t.send("Hello!", 4)  # warm both
            results: dict[str, list[dict[str, float]]] = {k: [] for k in targets}
            for rnd in range(args.rounds):
                order = list(targets) if rnd % 2 == 0 else list(reversed(targets))
                for name in order:
                    results[name].append(measure(targets[name], args, rnd))
                    print(name, {k: round(v, 1) for k, v in results[name][-1].items()}, flush=True)
            report(results, args.rounds)
        finally:
            for proc, _ in procs:
                proc.terminate()
                proc.wait(timeout=30)

if __name__ == "__main__":
    main()
