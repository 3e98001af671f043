"""Fuzz the JSON-schema-to-grammar path for longer than the test run does, offline and on a real server.

    python fuzz/fuzz_grammar.py [--examples 5000] [--address-space-gib 3] [--server-seconds 600] [--seed 1]

Offline: Hypothesis draws random schemas (``tests/helpers/schemafuzz.py``: nested arrays, objects,
enums, and hostile patterns: negated classes, empty classes, nested repetitions, every spelling of a
quantifier) and feeds each through ``schema_grammar``, llama.cpp's grammar parser and the grammar
check's walk, in a child process under an address-space limit (the test run does 200). Prints how
many schemas, how many were accepted and refused, the slowest, and the total time. A crash fails the
run with the child's output: keep the schema as a file in ``tests/engine/regressions/schemas/``.

On a server (``--server-seconds``, 0 to skip): the real server over the starter model (SmolLM2, 2
slots), with one client streaming replies back to back the whole time while another sends
``random_schema`` schemas as ``response_format``, half of them streamed, each for a few tokens, so
every grammar that passes the checks is sampled by the shared runner. Prints the inputs, their
answers by status, the runner's deaths (its PID must not change) and 5xx answers (both must be 0),
and the streaming client's longest gap between chunks, against the same measured alone first.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from tests.helpers import schemafuzz  # noqa: E402

ASK = [{"role": "user", "content": "Give me a short value."}]
STREAM_ASK = [{"role": "user", "content": "Tell me about the sea."}]


def offline(examples: int, address_space: int) -> None:
    figures = schemafuzz.run(examples, timeout_s=examples * 5 + 120, address_space=address_space)
    print(json.dumps(figures))
    print(f"{figures['examples']} schemas in {figures['total_s']:.1f} s: {figures['accepted']} accepted, "
          f"{figures['refused']} refused by the limits, {figures['llama_refused']} by llama.cpp's parser, "
          f"{figures['walk_refused']} by the walk, slowest {figures['worst_s'] * 1000:.0f} ms, 0 crashes")


class Streamer(threading.Thread):
    """One client streaming replies back to back; records the longest gap between two chunks."""

    def __init__(self, client):
        super().__init__(daemon=True)
        self.client, self.stop, self.gaps, self.errors, self.replies = client, threading.Event(), [], [], 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                last = None
                for _ in self.client.chat.completions.create(model="starter", messages=STREAM_ASK, max_tokens=40,
                                                             stream=True):
                    now = time.perf_counter()
                    if last is not None:
                        self.gaps.append(now - last)
                    last = now
                self.replies += 1
            except Exception as exc:  # noqa: BLE001 - every failure is a finding, reported at the end
                self.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def window(self) -> tuple[float, float]:
        """(longest, 99th percentile) gap since the last call, in seconds; starts a new window."""
        gaps, self.gaps = sorted(self.gaps), []
        if not gaps:
            return 0.0, 0.0
        return gaps[-1], gaps[int(len(gaps) * 0.99)]


def _send(client, schema: dict, stream: bool) -> str:
    """The outcome of one fuzzed request: "200", "400 <code>", or "5xx ..." / an exception's name."""
    import openai

    fmt = {"type": "json_schema", "json_schema": {"name": "fuzz", "schema": schema}}
    try:
        if stream:
            for _ in client.chat.completions.create(model="starter", messages=ASK, max_tokens=12, stream=True,
                                                    response_format=fmt):
                pass
        else:
            client.chat.completions.create(model="starter", messages=ASK, max_tokens=12, response_format=fmt)
        return "200"
    except openai.APIStatusError as exc:
        code = (exc.body or {}).get("code") if isinstance(exc.body, dict) else None
        return f"{exc.status_code} {code}"
    except openai.APIError as exc:  # an error event inside a stream that had started
        return f"stream-error {getattr(exc, 'code', None) or exc.message[:80]}"


def on_server(seconds: float, seed: int) -> int:
    import openai

    from fireside.engine.library import Library
    from fireside.engine.runtime.runtime import Runtime
    from fireside.engine.server import ServerThread, create_app
    from fireside.engine.settings import Settings

    with tempfile.TemporaryDirectory() as home:
        settings = Settings.from_env({"FIRESIDE_HOME": home})
        settings.ensure_dirs()
        library = Library(settings)
        runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path, max_queue=32)
        thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
        thread.start()
        try:
            client = openai.OpenAI(base_url=f"{thread.url}/v1", api_key="unused", max_retries=0, timeout=300)
            client.chat.completions.create(model="starter", messages=ASK, max_tokens=1)
            streamer = Streamer(client)
            streamer.start()
            time.sleep(20)
            alone = streamer.window()
            figures = _fuzz(client, runtime, seconds, random.Random(seed))
            figures.update(gap_alone_s=alone, gap_during_s=streamer.window())
            streamer.stop.set()
            streamer.join(120)
        finally:
            thread.stop()
            runtime.close()
    figures.update(stream_replies=streamer.replies, stream_errors=streamer.errors)
    print(json.dumps(figures))
    outcomes, during = figures["outcomes"], figures["gap_during_s"]
    print(f"{figures['inputs']} schemas on the server in {figures['seconds']:.0f} s: {outcomes.get('200', 0)} answered, "
          f"{sum(v for k, v in outcomes.items() if k.startswith('400'))} refused (400), "
          f"{sum(v for k, v in outcomes.items() if k.startswith('5'))} 5xx, {figures['deaths']} runner deaths, "
          f"{len(streamer.errors)} errors in the other client's {streamer.replies} streams; its longest gap between "
          f"chunks {during[0] * 1000:.0f} ms (p99 {during[1] * 1000:.0f} ms), alone {figures['gap_alone_s'][0] * 1000:.0f} "
          f"ms (p99 {figures['gap_alone_s'][1] * 1000:.0f} ms); slowest request {figures['slowest'][0]:.1f} s")
    return 1 if figures["findings"] or streamer.errors else 0


def _fuzz(client, runtime, seconds: float, rng: random.Random) -> dict:
    """Send random schemas for ``seconds``; the outcomes by kind, and every 5xx or runner death found."""
    pid = runtime.loaded()[0].pid
    outcomes: dict[str, int] = {}
    findings: list[str] = []
    slowest = (0.0, "")
    started = time.perf_counter()
    n = deaths = 0
    while time.perf_counter() - started < seconds:
        schema = schemafuzz.random_schema(rng)
        sent = time.perf_counter()
        outcome = _send(client, schema, stream=n % 2 == 1)
        slowest = max(slowest, (time.perf_counter() - sent, json.dumps(schema)[:300]))
        n += 1
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome.startswith("5") or outcome.startswith("stream-error") and "dead_end" not in outcome:
            findings.append(f"{outcome}: {json.dumps(schema)[:300]}")
        now = runtime.loaded()[0].pid if runtime.loaded() else None
        if now != pid:
            deaths += 1
            findings.append(f"runner died (pid {pid} -> {now}) after {json.dumps(schema)[:300]}")
            pid = now
    return {"inputs": n, "seconds": round(time.perf_counter() - started, 1), "outcomes": outcomes,
            "findings": findings, "deaths": deaths, "slowest": slowest}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--address-space-gib", type=float, default=3)
    parser.add_argument("--server-seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.examples:
        offline(args.examples, int(args.address_space_gib * 2**30))
    return on_server(args.server_seconds, args.seed) if args.server_seconds else 0


if __name__ == "__main__":
    sys.exit(main())
