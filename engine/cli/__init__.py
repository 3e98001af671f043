"""The ``fireside`` command: drives the engine headless. Each command group lives in its own module
and adds its subcommands through ``register(subparsers)``; handlers return an exit code."""

from __future__ import annotations

import argparse
import logging
import sys

from ..deps import check_floors
from ..errors import FiresideError
from . import bench, cache, chat, library, mcp, models, remote, server

GROUPS = [models, chat, library, server, bench, remote, mcp, cache]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fireside", description="Run and serve local language models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine is doing")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s: %(message)s")
    if not getattr(args, "handler", None):
        parser.print_help()
        return 0
    problems = check_floors()
    if problems:  # say so now, plainly, rather than fail obscurely deep inside a library
        for problem in problems:
            print(f"fireside: {problem}", file=sys.stderr)
        return 1
    try:
        return args.handler(args) or 0
    except FiresideError as exc:
        print(f"fireside: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `fireside ls | head`: the reader left, which is fine
        sys.stdout = None
        return 0


if __name__ == "__main__":
    sys.exit(main())
