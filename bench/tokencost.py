"""What each streamed token costs in CPU outside llama.cpp's kernels: the server process and the runner.

Starts ``fireside serve`` with the starter model (SmolLM2-135M) at ``--threads 1`` (so the runner's
CPU is one decode thread plus its Python, with no spinning peers), streams ``--replies`` greedy replies
of ``--tokens`` tokens through ``/v1/chat/completions`` and prints the CPU time (user + system) the
server process and the runner process spent per token, from ``psutil``. CPU time, not wall time:
it holds up on a shared machine far better than tokens/s does. The runner's figure includes the
decode itself; compare it before and after a change to the runner's Python between decodes.

    python bench/tokencost.py [--tokens 256] [--replies 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import psutil

from fireside.engine.bench.targets import HttpTarget, free_port, wait_until_serving

PROMPT = "Write a very long story about a lighthouse keeper."


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--replies", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "serve", "--port", str(port), "--load",
                                 "starter", "--keep-alive", "-1", "--ctx", "2048", "--parallel", "1", "--threads", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "FIRESIDE_HOME": home})
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_serving(proc, url)
            server = psutil.Process(proc.pid)
            runner = next(c for c in server.children() if "runner" in " ".join(c.cmdline()))
            target = HttpTarget(url, "starter", endpoint="chat")
            target.send(PROMPT, 16)  # warm up
            per_server, per_runner, rates = [], [], []
            for _ in range(args.replies):
                s0, r0 = cpu(server), cpu(runner)
                r = target.send(PROMPT, args.tokens)
                assert r.ok, r.error
                n = r.completion_tokens
                per_server.append((cpu(server) - s0) / n * 1e6)
                per_runner.append((cpu(runner) - r0) / n * 1e6)
                rates.append((n - 1) / (r.latency_s - r.ttft_s))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"server CPU per token: {statistics.median(per_server):.0f} us (runs: "
          f"{', '.join(f'{x:.0f}' for x in per_server)})")
    print(f"runner CPU per token: {statistics.median(per_runner):.0f} us (runs: "
          f"{', '.join(f'{x:.0f}' for x in per_runner)})")
    print(f"decode: {statistics.median(rates):.1f} tok/s (median; wall time, noisy on a shared machine)")


if __name__ == "__main__":
    main()
