"""What a grammar costs: decode tokens/s of free text beside a JSON-schema reply and a forced tool call.

Runs the starter model (SmolLM2-135M) through the runtime, one request at a time, greedy, and prints
the median decode rate of each kind and its ratio to free text. A grammar checked against the whole
vocabulary at every step (49,152 tokens for SmolLM2) is what the sampler's lazy check avoids.

    python bench/grammar.py [--tokens 40] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

ASK = [{"role": "user", "content": "Describe the weather in Paris in detail."}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "summary": {"type": "string"}},
          "required": ["city", "summary"]}
TOOL = {"type": "function", "function": {"name": "report", "parameters": SCHEMA}}


def rate(rt: Runtime, request: ChatRequest) -> float:
    done = [c for c in rt.chat("starter", request) if c.kind == "done"][-1]
    return done.usage.decode_tokens_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    settings = Settings.from_env({"FIRESIDE_HOME": tempfile.mkdtemp(prefix="fireside-bench-")})
    settings.ensure_dirs()
    library = Library(settings)
    rt = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    try:
        rt.load("starter")

        def sampling() -> Sampling:
            return Sampling(temperature=0.0, max_tokens=args.tokens)

        kinds = {
            "free text": lambda: ChatRequest(messages=ASK, sampling=sampling()),
            "json_schema": lambda: ChatRequest(messages=ASK, sampling=sampling(), json_schema=SCHEMA),
            "forced tool": lambda: ChatRequest(messages=ASK, sampling=sampling(), tools=[TOOL],
                                               tool_choice={"name": "report"}),
        }
        rates = {name: statistics.median(rate(rt, make()) for _ in range(args.rounds)) for name, make in kinds.items()}
    finally:
        rt.close()
    base = rates["free text"]
    for name, value in rates.items():
        print(f"{name:12s} {value:7.1f} tokens/s decode   {value / base:5.2f}x free text")


if __name__ == "__main__":
    main()
