"""One thread budget for every runner: the machine's cores, split between the models decoding now.

Each runner alone would take every core (llama.cpp's default, and every peer's), so two models
decoding at once ran four threads on two cores, and each step waited for a descheduled thread
(issue 28). The runtime tells each runner that starts decoding its share, and the others theirs
again, with a ``threads`` frame on its pipe (``runner/process.py`` hands it to its ``StepThreads``,
``runner/threads.py``, which never uses more and measures whether fewer are faster). A runner
loaded with a user's ``--threads N`` keeps N and the rest is split among the others; a runner that
stops decoding keeps its last share until it decodes again, when it is told afresh.

Threading: ``decoding`` may be called from any thread (one lock; frames go out under it, so each
runner sees its shares in the order they were decided).
"""

from __future__ import annotations

import threading
from typing import Protocol


class Runner(Protocol):
    def tell(self, op: str, **payload: object) -> None: ...


def shares(total: int, decoding: list[int | None]) -> list[int]:
    """Each decoding runner's threads: a fixed count (an int in ``decoding``) is kept; the cores
    left are split evenly among the others (None), the first ones taking any remainder, at least 1."""
    total = max(1, total)
    free = [i for i, fixed in enumerate(decoding) if fixed is None]
    rest = max(0, total - sum(fixed for fixed in decoding if fixed is not None))
    out = [fixed or 0 for fixed in decoding]
    for n, i in enumerate(free):
        out[i] = max(1, rest // len(free) + (1 if n < rest % len(free) else 0))
    return out


class ThreadBudget:
    """The engine's cores, and who is decoding on them."""

    def __init__(self, total: int):
        self.total = max(1, total)
        self._lock = threading.Lock()
        self._decoding: dict[Runner, int | None] = {}  # runner -> its fixed count (None: adaptive)
        self._told: dict[Runner, int] = {}

    def decoding(self, runner: Runner, on: bool, fixed: int | None = None) -> None:
        """``runner`` started (``on``) or stopped decoding; tell every decoding runner whose share moved."""
        with self._lock:
            if on:
                self._decoding[runner] = fixed
            else:
                self._decoding.pop(runner, None)
            runners = list(self._decoding)
            for r, n in zip(runners, shares(self.total, list(self._decoding.values()))):
                if self._told.get(r) != n:
                    self._told[r] = n
                    r.tell("threads", share=n)

    def forget(self, runner: Runner) -> None:
        """``runner`` is gone (unloaded, crashed)."""
        with self._lock:
            self._told.pop(runner, None)
        self.decoding(runner, False)
