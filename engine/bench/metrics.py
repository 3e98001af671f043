"""Per-level figures from timed requests, computed the way ``vllm bench serve`` computes them.

Output throughput is the completion tokens of the successful requests over the level's wall time.
TTFT is the time from sending a request to its first piece of output. TPOT is, per request, the
time after the first token divided by the tokens after it: ``(latency - ttft) / (tokens - 1)``.
ITL is every gap between two consecutive pieces of output, across all requests. Each is summarised
by its mean and its 50th, 90th and 99th percentiles (linear interpolation, as numpy does), in
milliseconds. The length check compares the tokens each reply had with the tokens asked for and
says in words what a mismatch means.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from .targets import RequestResult

PERCENTILES = (50, 90, 99)


@dataclass
class Stat:
    mean: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0

    @classmethod
    def of_seconds(cls, values: list[float]) -> Stat:
        if not values:
            return cls()
        ms = np.asarray(values, dtype=float) * 1000.0
        p50, p90, p99 = (float(v) for v in np.percentile(ms, PERCENTILES))
        return cls(float(ms.mean()), p50, p90, p99)


@dataclass
class LengthCheck:
    """Tokens given against tokens asked: ``longer`` replies mean the server ignored max_tokens;
    ``shorter`` ones ended early (end of sequence or a stop) because the server did not honour
    ``ignore_eos``/``min_tokens``."""

    asked_per_request: int
    asked: int = 0
    given: int = 0
    longer: int = 0
    shorter: int = 0
    counted_from_events: int = 0

    def notes(self, total: int) -> list[str]:
        notes = []
        if self.longer:
            notes.append(f"{self.longer} of {total} replies were longer than the {self.asked_per_request} tokens "
                         f"asked for: the server ignored max_tokens")
        if self.shorter:
            notes.append(f"{self.shorter} of {total} replies ended before {self.asked_per_request} tokens: the "
                         f"server stopped at end of sequence and did not honour ignore_eos/min_tokens, so the "
                         f"figures cover {self.given} tokens, not the {self.asked} asked for")
        if self.counted_from_events:
            notes.append(f"{self.counted_from_events} of {total} replies came without usage: their tokens are "
                         f"counted as stream events, which may hold more than one token each")
        return notes


@dataclass
class LevelResult:
    concurrency: int
    requests: int
    ok: int
    failed: int
    duration_s: float
    prompt_tokens: int
    completion_tokens: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2e_ms: Stat
    length: LengthCheck
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarise(concurrency: int, results: list[RequestResult], duration_s: float, asked: int) -> LevelResult:
    """The figures for one concurrency level from its requests and its wall time."""
    good = [r for r in results if r.ok]
    tokens = sum(r.completion_tokens for r in good)
    tpots = [(r.latency_s - r.ttft_s) / (r.completion_tokens - 1) for r in good if r.completion_tokens > 1]
    length = LengthCheck(asked, asked=asked * len(good), given=tokens,
                         longer=sum(r.completion_tokens > asked for r in good),
                         shorter=sum(r.completion_tokens < asked for r in good),
                         counted_from_events=sum(not r.counted_from_usage for r in good))
    errors = sorted({r.error for r in results if not r.ok})
    notes = length.notes(len(good))
    if errors:
        notes.append(f"{len(results) - len(good)} of {len(results)} requests failed: {errors[0]}")
    duration = max(duration_s, 1e-9)
    return LevelResult(
        concurrency=concurrency, requests=len(results), ok=len(good), failed=len(results) - len(good),
        duration_s=duration_s, prompt_tokens=sum(r.prompt_tokens for r in good), completion_tokens=tokens,
        output_tokens_per_s=tokens / duration, requests_per_s=len(good) / duration,
        ttft_ms=Stat.of_seconds([r.ttft_s for r in good]), tpot_ms=Stat.of_seconds(tpots),
        itl_ms=Stat.of_seconds([gap for r in good for gap in r.itl_s]),
        e2e_ms=Stat.of_seconds([r.latency_s for r in good]), length=length, notes=notes, errors=errors[:5])
