"""A longer fuzzing run of the API server's request models than the test suite's bounded one.

The same Hypothesis strategies and model-free server as ``tests/server/test_fuzz.py``
(``tests/helpers/apifuzz.py``), plus the retrieval scenario of ``tests/helpers/storefuzz.py`` (a
document, hostile or plain, uploaded, put in a vector store, then searched, batched, listed and
deleted at random): every route gets an equal share of ``--seconds``, in rounds of fresh random
examples. Prints, per route, how many inputs were sent, in how many seconds, how many got a 5xx and
how many of those were crashes (a 500 or an internal error in a stream), and how far the server's
memory (this process: the server runs in it) had grown past where it stood after a first warm-up
round; writes each crash to ``--out`` as JSON lines ({"route", "body", "status", "why"}), ready to add to
``tests/server/fuzz_cases.json``. The last line says the run's length, its crashes and the server's
growth against ``--max-growth-mb`` (200). Exits 1 if any crash was found or the growth passed that.

    python fuzz/fuzz_api.py [--seconds 600] [--out fuzz_crashes.jsonl] [--max-growth-mb 200]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.helpers, from a checkout

from hypothesis import HealthCheck, given, settings  # noqa: E402

from tests.helpers.apifuzz import ROUTES, FuzzServer, fuzz_server, is_crash  # noqa: E402
from tests.helpers.flowing import rss  # noqa: E402
from tests.helpers.storefuzz import run_scenario, scenarios  # noqa: E402

ROUND = 50  # examples per Hypothesis run; a route runs rounds until its share of time is spent
SCENARIO = "openai.store_lifecycle"
STRATEGIES = {**{route: spec[2] for route, spec in ROUTES.items()}, SCENARIO: scenarios}
MiB = 1024 * 1024


def send(server: FuzzServer, route: str, value: object):
    return run_scenario(server, value) if route == SCENARIO else server.send(route, value)


def fuzz_route(server: FuzzServer, route: str, seconds: float, crashes: list[dict]) -> tuple[int, int, float]:
    """(inputs, 5xx answers, seconds) for ``route``; crashes are appended to ``crashes``."""
    counts = {"inputs": 0, "5xx": 0}

    @settings(max_examples=ROUND, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(value=STRATEGIES[route])
    def one(value):
        counts["inputs"] += 1
        outcome = send(server, route, value)
        if outcome.status >= 500:
            counts["5xx"] += 1
        if is_crash(outcome):
            crashes.append({"route": route, "body": json.dumps(value), "status": outcome.status,
                            "why": outcome.text[:300]})

    started = time.perf_counter()
    one()  # at least one round, however short the share
    while time.perf_counter() - started < seconds:
        one()
    return counts["inputs"], counts["5xx"], time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="total time, shared by the routes")
    parser.add_argument("--out", type=Path, default=Path("fuzz_crashes.jsonl"))
    parser.add_argument("--max-growth-mb", type=float, default=200.0, help="the server's allowed memory growth")
    parser.add_argument("--only", default="", help="fuzz only the routes whose names start with this")
    args = parser.parse_args()
    routes = [r for r in sorted(STRATEGIES) if r.startswith(args.only)]
    crashes: list[dict] = []
    totals = [0, 0, 0.0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as home, fuzz_server(home) as server:
        for route in routes:  # a warm-up round: imports, caches and the documents made once
            fuzz_route(server, route, 0.0, crashes)  # one round of ``ROUND`` examples
        base = peak = rss()
        print(f"{'route':<24} {'inputs':>8} {'seconds':>8} {'5xx':>5} {'crashes':>8} {'growth MB':>10}")
        for route in routes:
            before = len(crashes)
            inputs, errors, took = fuzz_route(server, route, args.seconds / len(routes), crashes)
            peak = max(peak, rss())
            print(f"{route:<24} {inputs:>8,} {took:>8.1f} {errors:>5} {len(crashes) - before:>8} "
                  f"{(rss() - base) / MiB:>+10.0f}")
            totals = [totals[0] + inputs, totals[1] + errors, totals[2] + took]
        growth = (rss() - base) / MiB
    print(f"{'all':<24} {totals[0]:>8,} {totals[2]:>8.1f} {totals[1]:>5} {len(crashes):>8} {growth:>+10.0f}")
    if crashes:
        args.out.write_text("".join(json.dumps(c) + "\n" for c in crashes), encoding="utf-8")
        print(f"crashes written to {args.out}")
    ok = not crashes and growth <= args.max_growth_mb
    print(f"{'PASS' if ok else 'FAIL'}: ran {time.perf_counter() - started:.0f} s ({totals[2]:.0f} s fuzzing), "
          f"{totals[0]:,} inputs, {len(crashes)} crashes, server growth {growth:+.0f} MB (peak "
          f"{(peak - base) / MiB:+.0f} MB; limit {args.max_growth_mb:.0f} MB)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
