"""Fuzz the JSON-schema-to-grammar path for longer than the test run does.

    python bench/fuzz_grammar.py [--examples 5000] [--address-space-gib 3]

Hypothesis draws random schemas and feeds each through ``schema_grammar`` and llama.cpp's grammar
parser in a child process under an address-space limit (``tests/helpers/schemafuzz.py``; the test run
does 300). Prints how many schemas, how many were accepted and refused, the slowest, and the total
time. A crash fails the run with the child's output: keep the schema as a file in
``tests/engine/regressions/schemas/``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from tests.helpers import schemafuzz  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--address-space-gib", type=float, default=3)
    args = parser.parse_args()
    figures = schemafuzz.run(args.examples, timeout_s=args.examples * 5 + 120,
                             address_space=int(args.address_space_gib * 2**30))
    print(json.dumps(figures))
    print(f"{figures['examples']} schemas in {figures['total_s']:.1f} s: {figures['accepted']} accepted, "
          f"{figures['refused']} refused by the limits, {figures['llama_refused']} by llama.cpp's parser, slowest {figures['worst_s'] * 1000:.0f} ms, 0 crashes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
