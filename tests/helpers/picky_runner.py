"""A real runner whose llama.cpp cannot make a q4_0 KV cache: a load that asks for one fails the way
llama.cpp does ("Failed to create llama_context"), every other load is the real one. Start it with
``Runtime(runner_command=picky_runner_command())``; tests use it for a load option that really fails."""

from __future__ import annotations

import sys
from pathlib import Path

from fireside.engine.runner import process as runner

Q4_0 = 2  # ggml's type id


def picky_runner_command() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve())]


def _load(self, req_id: str, msg: dict, cancel) -> None:
    if msg["kwargs"].get("type_k") == Q4_0:  # auto's q8_0 (the exact cache) loads: only the user's choice fails
        raise RuntimeError("llama.cpp could not load the model: Failed to create llama_context")
    _real_load(self, req_id, msg, cancel)


_real_load = runner.Runner.load

if __name__ == "__main__":
    runner.Runner.load = _load
    runner.main()
