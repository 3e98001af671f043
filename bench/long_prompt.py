"""A long fresh prompt (a coding agent's first request) through Fireside's runtime with its own thread
choice against each fixed thread count: the time to the first token, side by side.

A coding agent's first request is 7-23k tokens of tools and instructions (``engine/agents.py``); on a
CPU the prompt's evaluation is nearly all of the wait. Each 512-token chunk of it takes seconds, and its
time per token grows with its depth, which the runner's thread controller (``runner/threads.py``) once
took for a busier machine: Claude Code's first request flipped between 1 and 2 threads 213 times.

Each round loads the starter model afresh (a fresh home: no prompt cache) with ``--kv`` (f16 is what
``fireside launch`` gives agents) for each thread mode in turn, the order rotating each round, and sends
one prompt of about ``--tokens`` tokens of words (different words each load) for one token. The machine
may be shared: more ``--rounds`` take medians. The last line reads
``long_prompt: N tokens, auto X s, fixed-1 Y s, fixed-2 Z s; auto over the best fixed R.RRx``.

    python bench/long_prompt.py [--tokens 8192] [--rounds 1] [--kv f16]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile

from fireside.engine.library.starter import starter_path
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

WORDS = ("river stone lamp garden window harbor violin pepper candle meadow silver thunder basket "
         "orchard lantern copper willow canyon ribbon marble feather compass glacier").split()


def first_token_s(threads: int | None, tokens: int, ctx: int, kv: str, seed: int) -> float:
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": tempfile.mkdtemp(prefix="fireside-longprompt-")}),
                 resolver=lambda _: starter_path(), idle_ttl_s=0)
    try:
        rt.load("m", LoadOptions(context=ctx, kv_type=kv, threads=threads, parallel=1))
        rng = random.Random(seed)
        text = " ".join(rng.choice(WORDS) for _ in range(int(tokens * 0.95)))
        req = ChatRequest(messages=[{"role": "user", "content": text + "\nWhich word came first?"}],
                          sampling=Sampling(max_tokens=1, temperature=0, seed=1))
        done = list(rt.chat("m", req))[-1]
        return done.usage.ttft_s
    finally:
        rt.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--kv", default="f16")
    ap.add_argument("--modes", default="auto,fixed-1,fixed-2", help="which of auto, fixed-1, fixed-2 to run")
    args = ap.parse_args()
    ctx = args.tokens + 1024
    modes = [m for m in [("auto", None), ("fixed-1", 1), ("fixed-2", 2)] if m[0] in args.modes.split(",")]
    times: dict[str, list[float]] = {name: [] for name, _ in modes}
    for r in range(args.rounds):
        order = modes[r % len(modes):] + modes[:r % len(modes)]
        for name, threads in order:
            seconds = first_token_s(threads, args.tokens, ctx, args.kv, seed=10 * r + modes.index((name, threads)))
            times[name].append(seconds)
            print(f"round {r + 1}: {name:8} first token after {seconds:6.1f} s", flush=True)
    med = {name: statistics.median(v) for name, v in times.items()}
    figures = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in med.items())
    fixed = [seconds for name, seconds in med.items() if name != "auto"]
    ratio = f"; auto over the best fixed {med['auto'] / min(fixed):.2f}x" if fixed and "auto" in med else ""
    print(f"long_prompt: {args.tokens} tokens, {figures}{ratio}")


if __name__ == "__main__":
    main()
