"""The starter split across two machines (llama.cpp's RPC backend through Fireside's TLS tunnel) against a
local load: decode speed and time to first token, with 0 and 1 ms of added delay on the link.

Two network namespaces joined by a veth pair (root and ``ip netns``; ``tests/helpers/netns.py``): ``alpha``
lends memory (``fireside serve --share --lend 1``), ``beta`` pairs with it and runs ``fireside run starter
--with alpha --gpu-layers N --stats`` (every run a fresh process: load, one reply, exit). The delay is
``tc qdisc ... netem delay`` on both ends of the link (so each direction is 1 ms slower) when the kernel
has netem; where it has not (this machine's), a relay in beta's namespace holds every chunk of bytes for
the delay in each direction before passing it on, and the line says so. Each namespace runs on its own
cores (``--cores ALPHA/BETA``, default ``1/0``) with as many threads, as two machines would; the local
load runs on beta's. Runs alternate local, split at 0 ms, split at 1 ms, for ``--rounds`` rounds; medians
are printed.

    python bench/rpc.py [--rounds 3] [--tokens 128] [--layers 16] [--cores 1/0]

Goal (issue 49): at 1 ms, decode >= 0.6x local and first token <= local + 30 ms. Last line:
``rpc: decode X.XXx at 0 ms, Y.YYx at 1 ms, first token +N ms``.
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers import netns  # noqa: E402
from tests.helpers.waiting import free_port  # noqa: E402

SHARE_PORT = 18768
PROMPT = "Write a short story about a lighthouse keeper and a storm."
STATS = re.compile(r"(\d+) tokens, ([\d.]+) tokens/s, first token after (\d+) ms")


class Pinned(netns.Device):
    """A device whose commands run on the given CPU cores only (``taskset``): two machines on one host."""

    cpus: str = "0"

    def command(self, *args: str) -> list[str]:
        return ["taskset", "-c", self.cpus, *super().command(*args)] if self.cpus else super().command(*args)


def _netem(ns: str, dev: str, ms: float) -> bool:
    done = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "netem",
                           "delay", f"{ms}ms"], capture_output=True, text=True)
    return done.returncode == 0


class DelayRelay:
    """127.0.0.1:port (in the namespace of the thread that makes it) -> target, every chunk held ``delay_s``
    in each direction, in order, as a slower link would."""

    def __init__(self, target: tuple[str, int], delay_s: float):
        self.target, self.delay_s = target, delay_s
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                a, _ = self.listener.accept()
            except OSError:
                return
            b = socket.create_connection(self.target)
            for s in (a, b):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for src, dst in ((a, b), (b, a)):
                q: queue.Queue = queue.Queue()
                threading.Thread(target=self._read, args=(src, q), daemon=True).start()
                threading.Thread(target=self._write, args=(dst, q), daemon=True).start()

    def _read(self, src: socket.socket, q: queue.Queue) -> None:
        while True:
            try:
                data = src.recv(1 << 20)
            except OSError:
                data = b""
            q.put((time.monotonic() + self.delay_s, data))
            if not data:
                return

    @staticmethod
    def _write(dst: socket.socket, q: queue.Queue) -> None:
        while True:
            due, data = q.get()
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            try:
                dst.sendall(data)
            except OSError:
                return


def _count(cpus: str) -> int:
    """How many cores a taskset list names ("0", "0,2", "0-3")."""
    return sum(int(b) - int(a) + 1 for a, _, b in (p.partition("-") if "-" in p else (p, "", p) for p in cpus.split(",")))


def _run(beta: Pinned, args: argparse.Namespace, *extra: str) -> tuple[float, float]:
    threads = ("--threads", str(_count(beta.cpus))) if beta.cpus else ()  # as many as its cores, not the host's
    done = beta.run("run", "starter", PROMPT, "--stats", "--temperature", "0", "--max-tokens", str(args.tokens),
                    "--ctx", "1024", "--parallel", "1", *threads, *extra, timeout=600)
    found = STATS.search(done.stderr)
    if done.returncode != 0 or not found:
        sys.exit(f"fireside run failed: {done.stderr[-1500:]}")
    return float(found.group(2)), float(found.group(3))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--layers", type=int, default=16, help="layers on alpha (of the starter's 30, plus output)")
    ap.add_argument("--cores", default="1/0", help="alpha's/beta's CPU cores (taskset lists; '' shares all): on "
                                                  "one host, llama.cpp's spinning threads on both sides would "
                                                  "otherwise take each other's cores")
    args = ap.parse_args()
    reason = netns.why_not()
    if reason:
        sys.exit(f"needs network namespaces: {reason}")
    from fireside.engine.rpc import module
    from fireside.engine.settings import Settings

    built = module(Settings.from_env().cache_dir)
    with netns.namespaces() as ((ns_a, ip_a), (ns_b, _)), tempfile.TemporaryDirectory() as tmp:
        alpha, beta = Pinned(ns_a, Path(tmp) / "alpha"), Pinned(ns_b, Path(tmp) / "beta")
        if args.cores:  # each namespace its own cores, as two machines would have
            alpha.cpus, beta.cpus = args.cores.split("/")
        for d in (alpha, beta):
            d.home.mkdir(parents=True)
            if built:
                shutil.copytree(built.parent.parent, d.home / "cache" / "rpc")
        port_a = free_port()
        with alpha.serve("--port", str(port_a), "--share", "--share-port", str(SHARE_PORT), "--name", "alpha",
                         "--lend", "1", "--no-jit"):
            code = alpha.run("devices", "code", "--port", str(port_a)).stdout.split("pairing code: ")[1].split()[0]
            paired = beta.run("devices", "pair", "alpha", "--address", f"{ip_a}:{SHARE_PORT}", "--as", "beta",
                              "--code", code)
            if paired.returncode != 0:
                sys.exit(f"pairing failed: {paired.stderr}")
            tag = ns_a.rsplit("-", 1)[0]
            netem = _netem(ns_a, f"{tag}a", 0) and _netem(ns_b, f"{tag}b", 0)
            relay = None if netem else netns.in_netns(ns_b, DelayRelay, (ip_a, SHARE_PORT), float(__import__("os").environ.get("RELAY_S", "0.001")))
            how = "netem on both ends" if netem else "a relay holding each chunk 1 ms each way (no netem here)"
            split = ("--with", "alpha", "--gpu-layers", str(args.layers))
            rows: dict[str, list[tuple[float, float]]] = {"local": [], "0 ms": [], "1 ms": []}
            for r in range(args.rounds):
                rows["local"].append(_run(beta, args))
                rows["0 ms"].append(_run(beta, args, *split))
                if netem:
                    _netem(ns_a, f"{tag}a", 1), _netem(ns_b, f"{tag}b", 1)
                else:
                    _move(beta, f"127.0.0.1:{relay.port}")
                rows["1 ms"].append(_run(beta, args, *split))
                if netem:
                    _netem(ns_a, f"{tag}a", 0), _netem(ns_b, f"{tag}b", 0)
                else:
                    _move(beta, f"{ip_a}:{SHARE_PORT}")
                print(f"round {r + 1}: " + "; ".join(f"{k} {v[-1][0]:.1f} tok/s, first token {v[-1][1]:.0f} ms"
                                                      for k, v in rows.items()), flush=True)
    med = {k: (statistics.median(t for t, _ in v), statistics.median(f for _, f in v)) for k, v in rows.items()}
    print(f"starter, {args.tokens} tokens, {args.layers} layers on alpha, alpha on cores {alpha.cpus or 'all'} and beta on "
          f"{beta.cpus or 'all'} (local runs on beta's), delay by {how}, medians of {args.rounds}:")
    for k, (tps, ttft) in med.items():
        print(f"  {k:6s} decode {tps:6.1f} tok/s ({tps / med['local'][0]:.2f}x local), first token {ttft:5.0f} ms")
    print(f"rpc: decode {med['0 ms'][0] / med['local'][0]:.2f}x at 0 ms, {med['1 ms'][0] / med['local'][0]:.2f}x at 1 ms, "
          f"first token {med['1 ms'][1] - med['local'][1]:+.0f} ms")


def _move(beta: netns.Device, address: str) -> None:
    """Point beta's book at ``address`` for alpha (the relay, or alpha itself again)."""
    import json

    path = beta.home / "config" / "devices.json"
    book = json.loads(path.read_text())
    for d in book["devices"]:
        if d["name"] == "alpha":
            d["address"] = address
    path.write_text(json.dumps(book, indent=2))


if __name__ == "__main__":
    main()
