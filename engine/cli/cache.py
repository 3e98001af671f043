"""``fireside cache ls|clear``: the prompt cache on disk (``engine/runner/kvcache.py``), where saved
KV states let a conversation resume without evaluating its history again.

``ls`` shows the folder, whether the cache is on, its size against the cap, and each saved state (its
model file, tokens, size, when it was last used, and the chat it belongs to, when the app saved it).
``clear`` deletes every state, or with ``--tag`` only one chat's. Deleting is always safe: a missing
state only means the next prompt is evaluated in full.
"""

from __future__ import annotations

import argparse
import time

from ..fmt import human_bytes
from ..runner import kvcache
from ..settings import Settings
from .fmt import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cache", help="list or clear the prompt cache (conversations' KV states on disk)")
    csub = p.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    ls = csub.add_parser("ls", help="the cache folder, its size and each saved state")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(handler=cmd_ls)
    clear = csub.add_parser("clear", help="delete the saved states (all, or one chat's with --tag)")
    clear.add_argument("--tag", help="only the states saved for this tag (the app tags them with a chat's id)")
    clear.set_defaults(handler=cmd_clear)


def _ago(t: float) -> str:
    s = max(0, time.time() - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s / size:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def cmd_ls(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    folder = settings.prompt_cache_dir
    entries = kvcache.entries(folder)
    size = kvcache.total_size(folder)
    if args.json:
        print_json({"folder": str(folder), "enabled": settings.prompt_cache, "size_bytes": size,
                    "cap_bytes": settings.prompt_cache_cap_bytes, "entries": [e.__dict__ for e in entries]})
        return 0
    state = "on" if settings.prompt_cache else "off (FIRESIDE_PROMPT_CACHE=off)"
    print(f"prompt cache {state}: {folder}")
    print(f"{human_bytes(size)} of {human_bytes(settings.prompt_cache_cap_bytes)}, "
          f"{len(entries)} saved state{'s' if len(entries) != 1 else ''}")
    if entries:
        rows = [[e.model or "?", f"{e.n_tokens:,}", human_bytes(e.size), _ago(e.last_used), e.tag or "",
                 e.identity[:12]] for e in entries]
        print(table(rows, ["MODEL FILE", "TOKENS", "SIZE", "LAST USED", "TAG", "IDENTITY"]))
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    folder = Settings.from_env().prompt_cache_dir
    n = kvcache.clear(folder, tag=args.tag)
    which = f" for tag {args.tag}" if args.tag else ""
    print(f"deleted {n} saved state{'s' if n != 1 else ''}{which}; {human_bytes(kvcache.total_size(folder))} left")
    return 0
