"""Weights in huge pages against weights mapped from the file (planner.huge_pages): one stream's decode speed.

Two ``fireside serve`` processes on the starter model (SmolLM2-135M), the same threads and context, one
loading as Fireside chooses on this machine (a CPU-only load on Linux with transparent huge pages reads
its weights into memory in huge pages) and one with ``--no-huge-pages`` (the file mapped, llama.cpp's
and llama-server's default), take turns on the same chat at each depth: a history of about the depth in
tokens sent once, then the next turn decoding ``--tokens`` tokens from the cached history (as
``longchat.py`` does), greedy (the exact kind at every depth) and sampled (the long-chat lane past the
calibrated depth). Each round alternates which goes first; prints each turn, the medians and the
ratio of the medians (huge pages over mapped), and the median of the per-round ratios, which a busy
spell of the machine touches less. Also prints how much of each runner is in huge pages.

    python bench/hugepages.py [--rounds 6] [--depths 0,4096] [--tokens 128]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile

from batching import start_fireside
from longchat import ChatTarget, calibrate, decode_speed

from fireside.engine.models.hardware import detect


def huge_bytes(pid: int) -> int:
    """The anonymous memory of ``pid`` and its children (the runners) in transparent huge pages."""
    pids = [pid, *(int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split())]
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                total += sum(int(line.split()[1]) * 1024 for line in fh if line.startswith("AnonHugePages:"))
        except OSError:
            pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--depths", default="0,4096")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sampling", default="greedy,sampled")
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    mode = detect().huge_pages or "none (not Linux with glibc)"
    print(f"transparent huge pages: {mode}; one stream, {args.tokens} tokens after each depth, {args.threads} threads",
          flush=True)
    ctx = max(depths) + args.tokens + 1024
    with tempfile.TemporaryDirectory() as home:
        calibrate(home, args.threads)
        procs = {"huge pages": start_fireside(home, args.threads, ctx, 1),
                 "mapped": start_fireside(home, args.threads, ctx, 1, ["--no-huge-pages"])}
        try:
            targets = {name: ChatTarget(url, "starter", endpoint="chat", exact_length=False)
                       for name, (_, url) in procs.items()}
            names = list(targets)
            for kind in [k for k in ("greedy", "sampled") if k in args.sampling.split(",")]:
                for target in targets.values():
                    target.temperature = 0.0 if kind == "greedy" else 0.7
                for depth in depths:
                    speeds: dict[str, list[float]] = {n: [] for n in names}
                    for rnd in range(args.rounds):
                        for name in names if rnd % 2 == 0 else names[::-1]:
                            speed, _ = decode_speed(targets[name], depth, args.tokens, 1000 * rnd + depth)
                            speeds[name].append(speed)
                            print(f"{kind} depth {depth:5} round {rnd + 1} {name:10} {speed:6.1f} tok/s", flush=True)
                    huge, mapped = (statistics.median(speeds[n]) for n in names)
                    paired = statistics.median(h / m for h, m in zip(*speeds.values(), strict=True))
                    print(f"hugepages {kind} depth {depth}: huge pages {huge:.1f} tok/s, mapped {mapped:.1f}: "
                          f"{huge / mapped:.3f}x (median of the rounds' ratios {paired:.3f}x)", flush=True)
            for name, (proc, _) in procs.items():
                print(f"{name}: {huge_bytes(proc.pid) / 2**20:.0f} MiB in huge pages")
        finally:
            for proc, _ in procs.values():
                proc.terminate()
                proc.wait(timeout=30)
            print("(the machine may have been shared while measuring)")


if __name__ == "__main__":
    main()
