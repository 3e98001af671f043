"""Long chats (issue 47): one stream decoding 128 tokens on top of 0, 2k, 4k and 8k tokens of history,
Fireside against llama-server with its defaults (``-fa auto``) and with the better of ``-fa on`` /
``-fa off`` at each depth.

Each depth is a realistic multi-turn chat: a history of alternating turns of about the depth in
tokens is sent once (a one-token reply: the server evaluates and caches it), then the next turn
(the history, that reply and a new question) decodes ``--tokens`` tokens from the cached history;
the figure is that turn's decode speed (tokens after the first over the time after the first). Every
server runs the starter model (SmolLM2-135M) in a process of its own with the same threads and one
slot, as users run them, and the servers take turns depth by depth (the order alternating each
round), with the same client and the same request. On an AMX CPU llama-server runs with
``--no-repack``, as Fireside's load heals to (healing.py).

Two kinds of request (``--sampling``): greedy (temperature 0: Fireside promises the same reply
whatever else runs, so it decodes with the exact q8_0 + flash attention at every depth, and that
line shows what the promise costs), and sampled without a seed (temperature 0.7, as the app chats:
random anyway, so past the depth where this machine's calibration found a faster attention Fireside
decodes it in the long-chat lane, ``runner/lanes.py``). Fireside runs as it does for a user after its
first load: the home is a fresh one, and the bench first runs the attention calibration the first
load would have run in the background (``runtime/attention.py``) and prints its figures.

About 4-6 minutes a round and kind of request on 2 cores. The machine may be shared: the turns
alternate so a busy spell falls on each server alike, and more ``--rounds`` take medians. A line per
kind reads ``longchat greedy: vs default 0k X.XXx 2k X.XXx 4k X.XXx 8k X.XXx; vs best 0k ... 8k X.XXx``
(ratios of the medians), and the last line, the sampled kind's (a chat's), ``longchat: vs default ...; vs best
...``. A ``paired`` line per kind gives the median of each round's own ratio and
their range (``paired``): the figure least moved by a busy spell.

    python bench/longchat.py --llama-server /path/to/llama-server [--rounds 1] [--depths 0,2048,4096,8192]
                             [--sampling greedy,sampled]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import tempfile

from batching import WORDS, start_fireside

from fireside.engine.bench.targets import HttpTarget, free_port, started
from fireside.engine.library.starter import starter_path
from fireside.engine.models import hardware
from fireside.engine.models.inspection import inspect_file
from fireside.engine.runtime import attention
from fireside.engine.runtime.healing import cpu_has_amx
from fireside.engine.settings import Settings

SYSTEM = "You are a helpful assistant. Answer the last question, using the conversation so far."


class ChatTarget(HttpTarget):
    """A server asked with a whole conversation (``messages``), greedy or sampling as the app does."""

    messages: list[dict] = []
    temperature = 0.0

    def body(self, prompt: str, max_tokens: int, seed: int | None = None) -> dict:
        body = {**super().body(prompt, max_tokens, seed), "messages": self.messages, "temperature": self.temperature,
                "repeat_penalty": 1.1, "repeat_last_n": 64, "ignore_eos": True}
        return body


def calibrate(home: str, threads: int) -> None:
    """What a first load does in the background: measure the attention kinds, remember the figures."""
    settings = Settings.from_env({"FIRESIDE_HOME": home})
    settings.ensure_dirs()
    figures = attention.calibrate(str(starter_path()), threads)
    key = attention.model_key(hardware.detect(), inspect_file(starter_path()), threads)
    attention.Choices(settings.data_dir / "attention.json").remember(key, figures, "starter")
    entry = attention.Choices(settings.data_dir / "attention.json").get(key)
    print(f"calibration: {attention.describe(entry, attention.lane(figures, 1 << 20))}", flush=True)


def start_llama_server(binary: str, threads: int, ctx: int, fa: str | None, no_repack: bool):
    port = free_port()
    cmd = [binary, "-m", str(starter_path()), "-t", str(threads), "-c", str(ctx), "-np", "1",
           "--host", "127.0.0.1", "--port", str(port), "--no-webui", *(["-fa", fa] if fa else []),
           *(["--no-repack"] if no_repack else [])]
    return started(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), port, "/health")


def history(depth: int, nonce: int) -> list[dict]:
    """A chat of about ``depth`` tokens: turns of about 200 words (a word of WORDS is one token or two)."""
    rng = random.Random(nonce)
    messages = [{"role": "system", "content": f"({nonce}) {SYSTEM}"}]
    words = 0
    while words < depth * 0.8:
        n = min(200, int(depth * 0.8) - words + 1)
        messages.append({"role": "user", "content": "Note: " + " ".join(rng.choice(WORDS) for _ in range(n))})
        messages.append({"role": "assistant", "content": "Noted. " + " ".join(rng.choice(WORDS) for _ in range(20))})
        words += n + 22
    return messages


def decode_speed(target: ChatTarget, depth: int, tokens: int, nonce: int) -> tuple[float, int]:
    """The next turn's decode tokens/s after a history of ``depth`` tokens, and the history's size."""
    target.messages = history(depth, nonce)
    first = target.send("", 1)  # the history, evaluated and cached
    assert first.ok, first.error
    target.messages = [*target.messages, {"role": "assistant", "content": "Noted."},
                       {"role": "user", "content": "Now write a long story about everything above."}]
    r = target.send("", tokens)
    assert r.ok, r.error
    return (r.completion_tokens - 1) / max(r.latency_s - r.ttft_s, 1e-9), first.prompt_tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama-server", required=True, help="path to a llama-server binary")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--depths", default="0,2048,4096,8192")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--sampling", default="greedy,sampled", help="greedy, sampled (temperature 0.7, no seed) or both")
    ap.add_argument("--no-repack", action=argparse.BooleanOptionalAction, default=cpu_has_amx(),
                    help="llama-server without repacked/AMX kernels (default: on where the CPU has AMX)")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    kinds = [k for k in ("greedy", "sampled") if k in args.sampling.split(",")]
    ctx = max(depths) + args.tokens + 1024
    print(f"one stream, {args.tokens} tokens after each depth, {args.threads} threads; llama-server "
          f"{'with --no-repack (AMX CPU)' if args.no_repack else 'with its default kernels'}", flush=True)
    with tempfile.TemporaryDirectory() as home:
        calibrate(home, args.threads)
        procs = []
        try:
            procs.append(start_fireside(home, args.threads, ctx, 1))
            for fa in (None, "on", "off"):
                procs.append(start_llama_server(args.llama_server, args.threads, ctx, fa, args.no_repack))
            names = ["fireside", "llama-server default", "llama-server -fa on", "llama-server -fa off"]
            targets = {n: ChatTarget(url, "starter", endpoint="chat", exact_length=False)
                       for n, (_, url) in zip(names, procs, strict=True)}
            lines = []
            for kind in kinds:
                for target in targets.values():
                    target.temperature = 0.0 if kind == "greedy" else 0.7
                speeds: dict[tuple[str, int], list[float]] = {}
                for rnd in range(args.rounds):
                    for i, depth in enumerate(depths):
                        order = names if (rnd + i) % 2 == 0 else names[::-1]
                        for name in order:
                            speed, n = decode_speed(targets[name], depth, args.tokens, 1000 * rnd + depth)
                            speeds.setdefault((name, depth), []).append(speed)
                            print(f"{kind} round {rnd + 1} depth {depth:5} ({n:5} tokens) {name:22} {speed:7.1f} tok/s",
                                  flush=True)
                lines.append(report(speeds, names, depths, kind))
            for kind, line in zip(kinds, lines, strict=True):
                print(f"longchat {kind}: {line}")
            print(f"longchat: {lines[-1]}")
        finally:
            env_note = "the machine may have been shared while measuring"
            for proc, _ in procs:
                proc.terminate()
                proc.wait(timeout=30)
            print(f"({env_note})")


def report(speeds: dict, names: list[str], depths: list[int], kind: str) -> str:
    """Print the medians; return the ratios' line."""
    med = {k: statistics.median(v) for k, v in speeds.items()}
    print(f"{kind:>8} {'depth':>6} " + " ".join(f"{n:>22}" for n in names) + "   (decode tok/s, medians)")
    for d in depths:
        print(f"{kind:>8} {d:6} " + " ".join(f"{med[(n, d)]:22.1f}" for n in names))
    vs_default = " ".join(f"{d // 1024}k {med[('fireside', d)] / med[('llama-server default', d)]:.2f}x" for d in depths)
    vs_best = " ".join(f"{d // 1024}k {med[('fireside', d)] / max(med[('llama-server -fa on', d)], med[('llama-server -fa off', d)]):.2f}x"
                       for d in depths)
    print(f"longchat {kind} paired: {paired(speeds, depths)}")
    return f"vs default {vs_default}; vs best {vs_best}"


def paired(speeds: dict, depths: list[int]) -> str:
    """The median of each round's own ratio: Fireside against the turn llama-server took beside it (the
    same depth, the same round, minutes apart), so a busy spell that slowed a round slows both sides of its
    ratio. "best" is the flag whose median is the higher at that depth, paired with its own rounds (the
    larger of two noisy figures each round would favour llama-server by the noise alone)."""
    parts = {"default": [], "best": []}
    for d in depths:
        best = max(("llama-server -fa on", "llama-server -fa off"), key=lambda n: statistics.median(speeds[(n, d)]))
        for label, name in (("default", "llama-server default"), ("best", best)):
            ratios = [f / o for f, o in zip(speeds[("fireside", d)], speeds[(name, d)], strict=True)]
            parts[label].append(f"{d // 1024}k {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")
    return f"vs default {' '.join(parts['default'])}; vs best {' '.join(parts['best'])} (median of the rounds' ratios, their range)"


if __name__ == "__main__":
    main()
