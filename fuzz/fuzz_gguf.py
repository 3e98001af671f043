"""Fuzz the GGUF reader for longer than the test run does, under the same address-space cap.

Runs the property of ``tests/helpers/gguf_fuzz.py`` (built headers and mutations of a real file; the
reader returns a ModelInfo or raises InvalidModelFile, within its time bound) in batches with a fresh
seed each, until ``--seconds`` have passed or ``--examples`` inputs have been tried, and prints the
inputs tried, the seconds, the crashes (any other exception, or a slow inspection) and the slowest
case. One input per kind of crash is saved under tests/engine/regressions/gguf/, which the test run
replays.

    python fuzz/fuzz_gguf.py [--seconds 60] [--examples N] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.helpers, run from anywhere

from tests.helpers.gguf_fuzz import REGRESSIONS, Fuzzer, limit_memory  # noqa: E402

BATCH = 200  # inputs of each kind per seed


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="stop after this long (default 60)")
    p.add_argument("--examples", type=int, default=0, help="stop after this many inputs (default: no limit)")
    p.add_argument("--seed", type=int, default=1, help="first seed; each batch takes the next")
    p.add_argument("--save", type=Path, default=REGRESSIONS, help="where crashes are saved")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    cap = limit_memory()
    with tempfile.TemporaryDirectory() as tmp:
        fuzzer = Fuzzer(Path(tmp), args.save)
        started, batch_seed = time.perf_counter(), args.seed
        while time.perf_counter() - started < args.seconds:
            if args.examples and fuzzer.report.inputs >= args.examples:
                break
            fuzzer.batch(BATCH, batch_seed)
            batch_seed += 1
    r = fuzzer.report
    if args.json:
        print(json.dumps({**r.__dict__, "wall_s": time.perf_counter() - started, "memory_cap": cap}))
        return 1 if r.crashes else 0
    print(f"inputs tried   {r.inputs:,} ({r.inputs / max(r.seconds, 1e-9):,.0f}/s, seeds {args.seed}..{batch_seed - 1})")
    print(f"seconds        {r.seconds:.1f}")
    print(f"address space  capped at {cap / 2**30:.2f} GiB" if cap else "address space  not capped here")
    print(f"crashes        {r.crashes} ({len(r.distinct)} distinct)")
    for d in r.distinct:
        print(f"  {d['kind']}: {d['error']}\n    saved as {d['file']}")
    print(f"slowest case   {r.slowest_s * 1000:.1f} ms (input sha256 {r.slowest_sha}...)")
    return 1 if r.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
