"""What ``tool_choice: "none"`` costs: decode speed of the same request under ``auto`` and ``none``.

    python bench/tool_choice_none.py [--rounds 3] [--max-tokens 96]

Under ``none`` the tools stay in the prompt and a grammar keeps the model from writing a tool call's
opening markup (``structured/grammar.py``: ``no_call_grammar``), so each token is sampled through llama.cpp's
grammar over the whole vocabulary. The request here never calls a tool, so both choices decode the same
kind of reply; rounds alternate the two, greedy and sampled, and the medians of the runtime's own
decode tokens/s are printed with their ratio, with the prompt tokens (equal: the same prompt).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from fireside.engine.runtime.runtime import Runtime  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402
from fireside.engine.types import ChatRequest, Sampling  # noqa: E402
from tests.helpers.models import smollm2_file  # noqa: E402

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
ASK = [{"role": "user", "content": "Write a long story about a dragon who learns to bake bread."}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96)
    args = parser.parse_args()
    settings = Settings.from_env({"FIRESIDE_HOME": tempfile.mkdtemp(prefix="fireside-bench-")})
    settings.ensure_dirs()
    path = smollm2_file()
    runtime = Runtime(settings, resolver=lambda ref: path)
    speeds: dict[str, list[float]] = {"auto": [], "none": []}
    prompts: dict[str, set[int]] = {"auto": set(), "none": set()}
    try:
        for _ in range(args.rounds):
            for temperature in (0.0, 0.7):
                for choice in ("auto", "none"):
                    request = ChatRequest(messages=ASK, tools=[WEATHER], tool_choice=choice, sampling=Sampling(
                        temperature=temperature, seed=1, max_tokens=args.max_tokens))
                    done = list(runtime.chat("starter", request))[-1]
                    speeds[choice].append(done.usage.decode_tokens_per_s)
                    prompts[choice].add(done.usage.prompt_tokens)
    finally:
        runtime.close()
    auto, none = (statistics.median(speeds[c]) for c in ("auto", "none"))
    print(f"prompt tokens: auto {sorted(prompts['auto'])}, none {sorted(prompts['none'])}")
    print(f"decode tokens/s, median of {len(speeds['auto'])}: auto {auto:.1f}, none {none:.1f} "
          f"(none/auto {none / auto:.2f})")


if __name__ == "__main__":
    main()
