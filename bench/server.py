"""What HTTP and SSE cost: one stream through the API server beside the runtime called directly.

Runs the starter model (SmolLM2-135M) on this machine, alternating a direct ``Runtime.chat`` stream
and the same request streamed through ``/v1/chat/completions`` (same prompt, seed and length, so both
decode the same tokens), and prints the median time to first token and decode tokens/s of each,
measured where the caller sees them, with the server/direct ratio. Goal: the server costs under 3%.

    python bench/server.py [--tokens 128] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import httpx

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]


def timed(pieces) -> tuple[float, float, int]:
    """(time to first token, decode tokens/s, tokens) for an iterator of text pieces."""
    started = time.perf_counter()
    first = last = None
    n = 0
    for _ in pieces:
        last = time.perf_counter()
        first = first or last
        n += 1
    if first is None or n < 2:
        raise SystemExit("the model produced too few tokens to measure")
    return first - started, (n - 1) / (last - first), n


def direct(rt: Runtime, tokens: int):
    req = ChatRequest(PROMPT, Sampling(max_tokens=tokens, seed=1, stop=[]))
    for chunk in rt.chat("starter", req):
        if chunk.kind == "text":
            yield chunk.text


def served(client: httpx.Client, url: str, tokens: int):
    body = {"model": "starter", "messages": PROMPT, "max_tokens": tokens, "seed": 1, "stream": True}
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0]["delta"].get("content"):
                yield choices[0]["delta"]["content"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"FIRESIDE_HOME": home})
        settings.ensure_dirs()
        library = Library(settings)
        rt = Runtime(settings, resolver=lambda ref: library.get(ref).path)
        server = ServerThread(create_app(rt, settings, library), "127.0.0.1", 0)
        server.start()
        try:
            run(rt, server.url, args.tokens, args.rounds)
        finally:
            server.stop()
            rt.close()


def run(rt: Runtime, url: str, tokens: int, rounds: int) -> None:
    rt.load("starter")
    results: dict[str, list[tuple[float, float, int]]] = {"direct": [], "server": []}
    with httpx.Client(timeout=300) as client:
        timed(direct(rt, 8))  # warm both paths once
        timed(served(client, url, 8))
        for _ in range(rounds):
            results["direct"].append(timed(direct(rt, tokens)))
            results["server"].append(timed(served(client, url, tokens)))
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), v[0][2])
           for k, v in results.items()}
    print(f"{'path':8} {'TTFT ms':>9} {'decode tok/s':>13} {'tokens':>7}   ({rounds} rounds, medians)")
    for name, (ttft, tps, n) in med.items():
        print(f"{name:8} {ttft * 1000:9.1f} {tps:13.1f} {n:7d}")
    d, s = med["direct"], med["server"]
    print(f"server/direct: decode {s[1] / d[1]:.3f}x ({(1 - s[1] / d[1]) * 100:+.1f}% cost), "
          f"TTFT {s[0] / d[0]:.3f}x ({(s[0] - d[0]) * 1000:+.1f} ms)")


if __name__ == "__main__":
    main()
