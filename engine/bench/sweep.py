"""The benchmark run: a warm-up, then each concurrency level in turn, every request bounded.

At a level of N, N worker threads take the level's prompts one after another, so at most N requests
are in flight at any time and a new one starts as soon as one finishes (``vllm bench serve
--max-concurrency N`` with an unlimited request rate). The level's wall time runs from the first
request sent to the last reply finished. The warm-up is not measured; it also finds out whether
the server takes ``ignore_eos``/``min_tokens`` and, if it refuses them, the run continues without.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import FiresideError
from .metrics import LevelResult, summarise
from .targets import RequestResult
from .workload import make_prompts

log = logging.getLogger(__name__)


class BenchError(FiresideError):
    """The benchmark could not run: the server refused even the warm-up, or the settings make no sense."""


@dataclass
class BenchConfig:
    concurrency: list[int] = field(default_factory=lambda: [1, 4, 8, 16])
    num_prompts: int = 32
    input_len: int = 128
    output_len: int = 64
    seed: int = 0
    warmup: int = 1
    prompt_file: Path | None = None

    def check(self) -> None:
        if not self.concurrency or min(self.concurrency) < 1:
            raise BenchError("concurrency levels must be whole numbers of at least 1")
        if self.num_prompts < 1 or self.output_len < 1 or self.input_len < 1 or self.warmup < 0:
            raise BenchError("--num-prompts, --input-len and --output-len must be at least 1")


@dataclass
class BenchReport:
    target: str
    model: str
    endpoint: str
    config: BenchConfig
    levels: list[LevelResult]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        config = asdict(self.config)
        config["prompt_file"] = str(self.config.prompt_file) if self.config.prompt_file else None
        return {"target": self.target, "model": self.model, "endpoint": self.endpoint, "config": config,
                "notes": self.notes, "levels": [level.to_dict() for level in self.levels]}


def warm_up(target, prompts: list[str], output_len: int, seed: int) -> list[str]:
    """Send the warm-up requests one by one; returns notes. Raises ``BenchError`` if none succeed."""
    notes: list[str] = []
    for i, prompt in enumerate(prompts):
        result = target.send(prompt, min(output_len, 16), seed)
        if not result.ok and result.status in (400, 422) and getattr(target, "exact_length", False):
            target.exact_length = False
            notes.append(f"the server refused ignore_eos/min_tokens ({result.error}); sent max_tokens alone")
            result = target.send(prompt, min(output_len, 16), seed)
        if not result.ok and i == len(prompts) - 1:
            raise BenchError(f"the warm-up request to {target.label} failed: {result.error}")
        if result.ok:
            log.info("warm-up request %d: %d tokens in %.2f s", i + 1, result.completion_tokens, result.latency_s)
    return notes


def run_level(target, concurrency: int, prompts: list[str], output_len: int, seed: int) -> LevelResult:
    """Send ``prompts`` with at most ``concurrency`` in flight; the figures for this level."""

    def one(i: int) -> RequestResult:
        return target.send(prompts[i], output_len, seed + i)

    # As timeit does, keep the garbage collector out of the timed window: in a process with a big heap
    # (the app, a test run) one full collection stops every client thread for 100 ms or more, which
    # would be charged to the server as latency.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix=f"bench-c{concurrency}") as pool:
            results = list(pool.map(one, range(len(prompts))))
        elapsed = time.perf_counter() - start
    finally:
        if was_enabled:
            gc.enable()
    return summarise(concurrency, results, elapsed, output_len)


def run_sweep(target, config: BenchConfig, *, model: str = "", endpoint: str = "completions",
              on_level: Callable[[LevelResult], None] | None = None) -> BenchReport:
    """Warm up, then run every concurrency level in order. Blocks; uses one thread per in-flight request."""
    config.check()
    n = config.num_prompts
    prompts = make_prompts(config.warmup + n * len(config.concurrency), config.input_len, config.seed,
                           config.prompt_file)
    notes = warm_up(target, prompts[:config.warmup], config.output_len, config.seed) if config.warmup else []
    levels = []
    for k, concurrency in enumerate(config.concurrency):
        first = config.warmup + k * n
        level = run_level(target, concurrency, prompts[first:first + n], config.output_len, config.seed)
        levels.append(level)
        if on_level:
            on_level(level)
    return BenchReport(target.label, model, endpoint, config, levels, notes)
