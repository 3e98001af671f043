"""What a paired device costs: a stream through another device's model beside the same server used directly.

Two Fireside installs in this process on loopback: ``alpha`` serves the starter model (SmolLM2-135M)
on its local API and shares it (the TLS listener of ``fireside serve --share``, paired devices'
tokens only); ``beta`` pairs with it by the real SPAKE2 exchange and serves ``alpha/starter`` through
its own local API (beta's server -> the remote-engine client -> TLS pinned to alpha's certificate ->
alpha's shared listener). Rounds alternate the same request (same prompt, seed and length) streamed
from alpha's API directly and from beta's API, and print the median time to first token and decode
tokens/s of each, measured where the client sees them. Goal: first token + <= 5 ms, decode >= 0.98x.
Both servers share this process (and its GIL) and the machine's cores, so the figures are an upper
bound on what the extra hop costs between two machines, less the network itself.

    python bench/devices.py [--tokens 128] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers: the in-memory keyring

from bench.server import PROMPT, timed  # noqa: E402
from fireside.engine.devices import DeviceBook, Identity  # noqa: E402
from fireside.engine.devices.pairing import PairingDesk, pair  # noqa: E402
from fireside.engine.facade import Engine  # noqa: E402
from fireside.engine.library import Library  # noqa: E402
from fireside.engine.remote import RemoteEngine  # noqa: E402
from fireside.engine.server import ServerThread, create_app  # noqa: E402
from fireside.engine.server.shared import Share, Sharing  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402
from tests.helpers.keyrings import MemoryKeyring  # noqa: E402


def streamed(client: httpx.Client, url: str, model: str, tokens: int):
    import json

    body = {"model": model, "messages": PROMPT, "max_tokens": tokens, "seed": 1, "stream": True}
    with client.stream("POST", f"{url}/v1/chat/completions", json=body) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0]["delta"].get("content"):
                yield choices[0]["delta"]["content"]


def alpha_servers(home: Path) -> tuple[Engine, PairingDesk, ServerThread, Sharing]:
    """alpha's loopback API and its shared listener, as ``fireside serve --share`` runs it (no mDNS)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    library = Library(settings)
    engine = Engine(settings, library=library, resolver=lambda ref: library.get(ref).path)
    shared = Sharing(settings, Share(host="127.0.0.1", port=0, name="alpha", announce=False), engine, library)
    local = ServerThread(create_app(engine, settings, library, pairing=shared.desk), "127.0.0.1", 0)
    return engine, shared.desk, local, shared


def main() -> None:
    import keyring

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    keyring.set_keyring(MemoryKeyring())
    with tempfile.TemporaryDirectory() as root:
        engine, desk, local, shared = alpha_servers(Path(root) / "alpha")
        beta_settings = Settings.from_env({"FIRESIDE_HOME": str(Path(root) / "beta")})
        beta_settings.ensure_dirs()
        beta = Engine(beta_settings, remotes=RemoteEngine(beta_settings))
        beta_server = ServerThread(create_app(beta, beta_settings, Library(beta_settings)), "127.0.0.1", 0)
        servers = [local, shared, beta_server]
        try:
            for server in servers:
                server.start()
            code, _ = desk.open_code()
            pair(DeviceBook(beta_settings), Identity.load_or_create(beta_settings, "beta"), "beta", "alpha",
                 "127.0.0.1", shared.server.port, code)
            engine.load("starter")
            run({"direct": (local.url, "starter"), "device": (beta_server.url, "alpha/starter")},
                args.tokens, args.rounds)
        finally:
            for server in reversed(servers):
                server.stop()
            beta.close()
            engine.close()


def run(paths: dict[str, tuple[str, str]], tokens: int, rounds: int) -> None:
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in paths}
    with httpx.Client(timeout=300) as client:
        for url, model in paths.values():  # warm both paths once (connections, the prompt cache)
            timed(streamed(client, url, model, 8))
        for _ in range(rounds):
            for name, (url, model) in paths.items():
                results[name].append(timed(streamed(client, url, model, tokens)))
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v), v[0][2])
           for k, v in results.items()}
    print(f"{'path':8} {'TTFT ms':>9} {'decode tok/s':>13} {'tokens':>7}   ({rounds} rounds, medians)")
    for name, (ttft, tps, n) in med.items():
        print(f"{name:8} {ttft * 1000:9.1f} {tps:13.1f} {n:7d}")
    d, s = med["direct"], med["device"]
    print(f"ratios: first-token {(s[0] - d[0]) * 1000:+.0f} ms, decode {s[1] / d[1]:.2f}x")


if __name__ == "__main__":
    main()
