"""Time to first token of the next turn of a long conversation: warm slot, restart with the prompt
cache on disk, restart without it.

Builds a conversation of about ``--tokens`` prompt tokens from real text (this project's docs, read
in parts: each user turn hands the model one part, each assistant turn acknowledges it), sends it once
to ``fireside serve`` with the starter model (SmolLM2-135M), then times the next turn three ways,
streamed through ``/v1/chat/completions`` and measured where the client sees the first token:

    (a) the same process, its slot still holding the conversation
    (b) after ``fireside serve`` is stopped and started again, with the prompt cache on disk
    (c) after a restart with ``--no-prompt-cache``: the whole conversation is evaluated again

Goal: (b) under 0.5 s and at least 20x faster than (c). Each run of (a) and (b) is repeated
``--rounds`` times (a fresh server for each (b)); medians are printed with the ratio. The cache file
(b) reads was just written, so it is likely in the OS page cache; a cold disk adds its read time.

    python bench/kvcache.py [--tokens 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from fireside.engine.bench.targets import free_port, wait_until_serving

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [ROOT / "docs" / "security.md", ROOT / "docs" / "api.md", ROOT / "README.md"]
NEXT = "Thank you. In one sentence: what does the first part say about hostile GGUF files?"


def conversation(url: str, target: int) -> list[dict]:
    """Turns of real text until the prompt is about ``target`` tokens (counted by the server)."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in SOURCES)
    parts = [text[i:i + 1400] for i in range(0, len(text), 1400)]
    messages = [{"role": "system", "content": "You are a careful reader. Keep every part the user gives you "
                                              "in mind and answer questions about them briefly."}]
    for n, part in enumerate(parts, 1):
        messages += [{"role": "user", "content": f"Part {n} of the document:\n\n{part}"},
                     {"role": "assistant", "content": f"I have read part {n}."}]
        if count(url, messages) >= target:
            return messages
    raise SystemExit(f"the docs give only {count(url, messages)} tokens; ask for fewer with --tokens")


def count(url: str, messages: list[dict]) -> int:
    system, rest = messages[0]["content"], messages[1:]
    r = httpx.post(f"{url}/v1/messages/count_tokens", json={"model": "starter", "system": system, "messages": rest},
                   timeout=60)
    r.raise_for_status()
    return r.json()["input_tokens"]


def ttft(url: str, messages: list[dict], tokens: int = 8) -> tuple[float, dict]:
    """Seconds to the first streamed content, and the reply's usage as the server reported it."""
    body = {"model": "starter", "messages": messages, "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    first, usage = None, {}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                usage = chunk["usage"]
            if first is None and chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                first = time.perf_counter() - started
    return (first if first is not None else time.perf_counter() - started), usage


class Serve:
    """``fireside serve`` in a subprocess, preloading the starter model with one slot."""

    def __init__(self, home: Path, *extra: str):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (home / "serve.log").open("ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "serve", "--port", str(self.port),
                                      "--load", "starter", "--parallel", "1", *extra],
                                     env={**os.environ, "FIRESIDE_HOME": str(home)}, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        try:
            wait_until_serving(self.proc, self.url, timeout=300)
        except RuntimeError as exc:
            raise SystemExit(f"fireside serve: {exc}; see {home / 'serve.log'}") from None

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)  # its shutdown lets the cache writer finish
        self.proc.wait(timeout=120)
        self.log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fireside-kvbench-") as tmp:
        home = Path(tmp)
        server = Serve(home)
        messages = conversation(server.url, args.tokens)
        print(f"conversation: {len(messages)} messages, {count(server.url, messages):,} tokens "
              f"from {', '.join(p.name for p in SOURCES)}")
        t, usage = ttft(server.url, messages)
        print(f"first send (cold): {t:.2f} s, {usage.get('prompt_tokens', 0):,} prompt tokens")
        turn = [*messages, {"role": "assistant", "content": "I have read them all."}, {"role": "user", "content": NEXT}]
        warm = [ttft(server.url, turn) for _ in range(args.rounds)]
        server.stop()
        restored = []
        for _ in range(args.rounds):
            server = Serve(home)
            restored.append(ttft(server.url, turn))
            server.stop()
        server = Serve(home, "--no-prompt-cache")
        cold = ttft(server.url, turn)
        server.stop()
        restores = [line.strip() for log in sorted((home / "cache" / "logs").glob("runner-*.log"))
                    for line in log.read_text(errors="replace").splitlines() if "from the prompt cache" in line]
    report(warm, restored, cold)
    print("\nthe runners' own account of each restore (the cache's cost, apart from decoding the next token):")
    for line in restores:
        print(f"  {line}")


def report(warm: list, restored: list, cold: tuple) -> None:
    a = statistics.median(t for t, _ in warm)
    b = statistics.median(t for t, _ in restored)
    c = cold[0]
    cached = [u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for _, u in restored]
    n = cold[1].get("prompt_tokens", 0)
    print(f"\nnext turn, {n:,} prompt tokens, time to first token (medians of {len(warm)}):")
    print(f"  (a) warm slot, same process       {a * 1000:8.0f} ms")
    print(f"  (b) restart, prompt cache on disk {b * 1000:8.0f} ms   (cached_tokens {cached})")
    print(f"  (c) restart, no prompt cache      {c * 1000:8.0f} ms   (cached_tokens "
          f"{cold[1].get('prompt_tokens_details', {}).get('cached_tokens', 0)})")
    print(f"  (c)/(b) = {c / b:.1f}x faster with the cache   goal: (b) < 500 ms and >= 20x: "
          f"{'met' if b < 0.5 and c / b >= 20 else 'NOT met'}")


if __name__ == "__main__":
    main()
