"""The lending side: what a sharing device runs when it lends its memory (``fireside serve --share --lend
GIB``, the app's switch). ``Lender`` keeps one worker (``worker.py``) for every paired device's tunnel
(llama.cpp's RPC server serves one client at a time; a second waits until the first is done), started at
the first tunnel, started again after a crash, stopped with sharing; and it answers what it offers:
free memory under its cap (the main machine's planner takes it as a device's free memory).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from .tunnel import RPC_PATH, serve_tunnel
from .worker import Worker

log = logging.getLogger(__name__)


class Lender:
    """Lends up to ``cap_bytes`` of this machine's memory (and its CPU) to paired devices. Building it
    builds llama.cpp's RPC backend when the install lacks one (``build.module``: seconds, once)."""

    path = RPC_PATH  # where the shared listener's middleware hands this lender a paired device's websocket

    def __init__(self, cap_bytes: int, cache_dir: Path, threads: int | None = None):
        from .build import module

        self.cap_bytes = int(cap_bytes)
        built = module(cache_dir)
        self.threads = threads or max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
        self.worker = Worker(self.cap_bytes, self.threads, str(built) if built else None,
                             cache_dir / "logs" / "rpc-worker.log")

    async def __call__(self, receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]],
                       still_paired: Callable[[], bool]) -> None:
        await serve_tunnel(receive, send, still_paired, self.worker.ensure)

    def offer(self) -> dict[str, int]:
        """What a paired device may plan with: the memory free here now, under the cap, and the cap."""
        import psutil

        free = psutil.virtual_memory().available
        return {"free_bytes": min(free, self.cap_bytes), "total_bytes": self.cap_bytes, "threads": self.threads}

    def stop(self) -> None:
        self.worker.stop()
