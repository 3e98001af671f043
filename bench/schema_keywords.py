"""Replies of the real starter model under random JSON schemas built from the value keywords.

    python bench/schema_keywords.py [--examples 200] [--max-tokens 48] [--minutes 60]

Hypothesis draws the schemas (``tests/helpers/keywordfuzz.py``: bounds, multipleOf, lengths, counts,
uniqueItems, formats, const, enum, pattern); each goes to SmolLM2-135M through the runtime, greedy, and
every reply is read back with ``jsonschema``. Prints how the replies ended (valid with ``stop``, cut at
the token limit, refused up front, refused after generation) and how many were invalid with ``stop``
(the property says 0), with the time per reply. ``--minutes`` stops early on a slow machine and says
how many it ran. The test run asks 3 (tests/server/test_schema_keywords_model.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from fireside.engine.library import Library  # noqa: E402
from fireside.engine.runtime.runtime import Runtime  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402
from tests.helpers.keywordfuzz import ask, schemas  # noqa: E402


def draw(examples: int) -> list[dict]:
    drawn: list[dict] = []

    @settings(max_examples=examples, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(schemas)
    def collect(schema):
        drawn.append(schema)

    collect()
    return drawn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--minutes", type=float, default=60)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="fireside-bench-")
    config = Settings.from_env({"FIRESIDE_HOME": home})
    config.ensure_dirs()
    library = Library(config)
    runtime = Runtime(config, resolver=lambda ref: library.get(ref).path)
    endings: Counter = Counter()
    invalid_stop: list[str] = []
    try:
        runtime.load("starter")
        todo = draw(args.examples)
        start = time.monotonic()
        for schema in todo:
            if time.monotonic() - start > args.minutes * 60:
                break
            try:
                endings[ask(runtime, schema, max_tokens=args.max_tokens)] += 1
            except AssertionError as exc:
                endings["INVALID with stop"] += 1
                invalid_stop.append(str(exc))
        took = time.monotonic() - start
    finally:
        runtime.close()
    ran = sum(endings.values())
    print(json.dumps({"schemas": ran, "drawn": len(todo), "endings": endings, "total_s": round(took, 1),
                      "per_reply_s": round(took / max(ran, 1), 2)}))
    print(f"{ran} of {len(todo)} schemas in {took:.0f} s ({took / max(ran, 1):.1f} s a reply): "
          + ", ".join(f"{n} {kind}" for kind, n in endings.most_common()))
    for line in invalid_stop:
        print("INVALID:", line)
    return 1 if invalid_stop else 0


if __name__ == "__main__":
    sys.exit(main())
