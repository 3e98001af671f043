"""A real runner whose load sticks inside "llama.cpp" after its first progress report: the handler
sleeps and never looks at its cancel event, as a warm-up or a wedged GPU driver would. Start it with
``Runtime(runner_command=wedged_runner_command())``; tests use it for Cancel on a load that cannot
stop by itself."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from fireside.engine.runner import process as runner


def wedged_runner_command() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve())]


def _load(self, req_id: str, msg: dict, cancel) -> None:
    self.reply(req_id, "progress", fraction=0.1)
    time.sleep(3600)  # stuck: no progress callback runs, so the cancel event is never seen


if __name__ == "__main__":
    runner.Runner.load = _load
    runner.main()
