"""Speculative decoding against llama-server: three workloads on the starter model (SmolLM2-135M).

(a) **edit**: a request asking for a function of Fireside's own source with a name changed is answered
greedily once (Fireside, drafting off); the same request is then sent again with that reply, changed in
two places, as OpenAI's ``prediction``, as a coding tool does after its first draft. llama-server has
no ``prediction``: it gets each of its ``--spec-type`` n-gram drafts and ``--spec-default``, and the best
is compared. (b) **quote**: questions whose answers repeat passages of a document given in the prompt
(n-gram drafts only, on both sides). (c) **story**: free writing, where drafts rarely hit, one stream,
and four streams at once against Fireside with drafting off (today's aggregate).

Every server is its own process, as users run it (``bench/batching.py`` starts them), one at a time,
with the same threads; all requests are greedy with Fireside's default repeat penalty. Speeds are
decode tokens/s over all inputs of a workload (tokens after the first, over the time after the first);
``from drafts`` is the share of reply tokens that came from accepted drafts.

    nice -n 10 python bench/speculative.py [--llama-server /path/to/llama-server] [--tokens 160]

Without a llama-server binary the peer columns are skipped (``nan``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from batching import start_fireside  # noqa: E402

from fireside.engine.bench.targets import free_port, started  # noqa: E402
from fireside.engine.library.starter import starter_path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SPEC_TYPES = ["ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache"]  # and --spec-default
NAN = float("nan")
TOPICS = ["a lighthouse keeper", "a dragon who bakes bread", "the first train to the coast", "a lost violin",
          "two rival gardeners"]


def functions(n: int) -> list[tuple[str, str]]:
    """``n`` short functions of Fireside's own source (real code), with a name in each to rename."""
    found = []
    for path in ["engine/fmt.py", "engine/runner/decode.py", "engine/runner/drafts.py",
                 "engine/fsutil.py", "engine/runner/tokens.py"]:
        text = (ROOT / path).read_text()
        for m in re.finditer(r"^def (\w+)\(.*?(?=^\S)", text, re.S | re.M):
            body = m.group(0).strip()
            if 150 < len(body) < 700:
                found.append((m.group(1), body))
                break
    return found[:n]


def document() -> tuple[str, list[str]]:
    """A document made of the README's paragraphs, and questions whose answers quote them."""
    paras = [p.strip() for p in (ROOT / "README.md").read_text().split("\n\n")
             if 250 < len(p.strip()) < 600 and not p.lstrip().startswith(("```", "|", "#"))][:5]
    doc = "\n\n".join(f"Paragraph {i + 1}: {p}" for i, p in enumerate(paras))
    return doc, [f"{doc}\n\nQuote paragraph {i + 1} word for word." for i in range(len(paras))]


def ask(url: str, prompt: str, tokens: int, prediction: str | None = None) -> dict:
    """One streamed greedy chat request: its text, tokens, decode time and the drafts the server reports."""
    body = {"model": "starter", "messages": [{"role": "user", "content": prompt}], "max_tokens": tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True},
            "repeat_penalty": 1.1, "repeat_last_n": 64}
    if prediction is not None:
        body["prediction"] = {"type": "content", "content": prediction}
    started, first, pieces, usage, timings = time.perf_counter(), None, [], {}, {}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            usage = event.get("usage") or usage
            timings = event.get("timings") or timings
            delta = (event.get("choices") or [{}])[0].get("delta", {}).get("content")
            if delta:
                first = first or time.perf_counter()
                pieces.append(delta)
    end = time.perf_counter()
    details = usage.get("completion_tokens_details") or {}
    accepted = details.get("accepted_prediction_tokens") or timings.get("draft_n_accepted") or 0
    return {"text": "".join(pieces), "n": usage.get("completion_tokens", 0), "decode_s": end - (first or end),
            "accepted": accepted, "wall_s": end - started}


def edited(text: str, name: str) -> str:
    """The reply changed in two places: the renamed name back in one spot, and one number or word."""
    at = text.find(name)
    text = text[:at] + name + "_old" + text[at + len(name):] if at >= 0 else text
    mid = len(text) // 2
    return text[:mid] + " # changed\n" + text[mid:]


def speed(results: list[dict]) -> tuple[float, float]:
    """Decode tokens/s over all results, and the share of reply tokens from accepted drafts."""
    n = sum(max(r["n"] - 1, 0) for r in results)
    s = sum(r["decode_s"] for r in results)
    return (n / s if s else NAN), sum(r["accepted"] for r in results) / max(sum(r["n"] for r in results), 1)


def workloads(args: argparse.Namespace) -> dict[str, list[tuple[str, str | None]]]:
    """Each workload's (prompt, prediction) pairs; edit's predictions are filled in from a first reply."""
    _, quotes = document()
    return {
        "edit": [(f"Return this code with the function {name} renamed to {name}_v2, and nothing else:\n\n{code}", name)
                 for name, code in functions(args.inputs)],
        "quote": [(q, None) for q in quotes],
        "story": [(f"Write a long story about {t}.", None) for t in TOPICS[:args.inputs]],
    }


def run_server(url: str, work: dict, tokens: int, predictions: dict | None) -> dict[str, tuple[float, float]]:
    out = {}
    for name, items in work.items():
        ask(url, items[0][0], 4)  # warm
        results = []
        for i, (prompt, _) in enumerate(items):
            pred = predictions.get((name, i)) if predictions is not None else None
            results.append(ask(url, prompt, tokens, pred))
        out[name] = speed(results)
    return out


def four_streams(url: str, tokens: int) -> float:
    prompts = [f"Write a long story about {t}." for t in TOPICS[:4]]
    started = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda p: ask(url, p, tokens), prompts))
    return sum(r["n"] for r in results) / (time.perf_counter() - started)


def llama_server(binary: str, threads: int, ctx: int, extra: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [binary, "-m", str(starter_path()), "-t", str(threads), "-c", str(ctx * 4), "-np", "4",
           "--host", "127.0.0.1", "--port", str(port), "--no-webui", *extra]
    return started(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port, "/health")


def measure_fireside(args, work, drafts: bool, predictions: dict | None) -> tuple[dict, float, dict]:
    """Fireside with prompt-lookup drafts on (``--drafts``) or off (its default; a prediction drafts either
    way, so the edit workload's first replies, made here with drafting off, have none)."""
    with tempfile.TemporaryDirectory() as home:
        proc, url = start_fireside(home, args.threads, args.ctx, 4, ["--drafts"] if drafts else [])
        try:
            replies = {}
            if predictions is None:  # the first, greedy replies the edit workload's predictions are made from
                for i, (prompt, name) in enumerate(work["edit"]):
                    replies[("edit", i)] = edited(ask(url, prompt, args.tokens)["text"], name)
            return run_server(url, work, args.tokens, predictions), four_streams(url, args.tokens), replies
        finally:
            proc.terminate()
            proc.wait(30)


def measure_peer(args, work) -> dict[str, dict]:
    if not args.llama_server or not Path(args.llama_server).exists():
        print(f"no llama-server at {args.llama_server!r}: the peer columns are skipped")
        return {}
    out = {}
    for label, extra in [("none", []), ("spec-default", ["--spec-default"]),
                         *[(t, ["--spec-type", t]) for t in SPEC_TYPES]]:
        proc, url = llama_server(args.llama_server, args.threads, args.ctx, extra)
        try:
            out[label] = run_server(url, work, args.tokens, None)
            print(f"llama-server {label:13}", fmt(out[label]), flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
    return out


def fmt(row: dict) -> str:
    return "  ".join(f"{k} {v[0]:6.1f} tok/s ({v[1]:4.0%} from drafts)" for k, v in row.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-server", default="/work/llama/bin/llama-server")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=160, help="most output tokens per reply")
    ap.add_argument("--inputs", type=int, default=5, help="inputs per workload (at least 5 for the README figures)")
    args = ap.parse_args()
    work = workloads(args)
    off, off4, predictions = measure_fireside(args, work, False, None)
    print("Fireside, drafting off  ", fmt(off), f" 4 stories {off4:.1f} tok/s", flush=True)
    on, on4, _ = measure_fireside(args, work, True, predictions)
    print("Fireside, drafting on   ", fmt(on), f" 4 stories {on4:.1f} tok/s", flush=True)
    peer = measure_peer(args, work)

    def best(key: str, labels: list[str]) -> float:
        return max((peer[x][key][0] for x in labels if x in peer), default=NAN)

    ratios = {"edit-self": on["edit"][0] / off["edit"][0],
              "edit-peer": on["edit"][0] / best("edit", ["spec-default", *SPEC_TYPES]),
              "quote-peer": on["quote"][0] / best("quote", ["spec-default", *SPEC_TYPES]),
              "story-peer": on["story"][0] / best("story", ["none"]),
              "story-4": on4 / off4}
    print("goals: edit-self >= 3, edit-peer >= 1.5, quote-peer >= 1.1, story-peer >= 0.97, story-4 >= 0.97")
    print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
