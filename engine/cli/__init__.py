"""The ``fireside`` command: drives the engine headless. Each command group lives in its own module
and adds its subcommands through ``register(subparsers)``; handlers return an exit code.

Standard error carries the command's own messages: the engine's and the libraries' log lines
(huggingface_hub's retries, the keyring notice, the server's startup steps) are shown only with
``--verbose`` (or ``FIRESIDE_LOG=info``; ``FIRESIDE_LOG=debug`` shows everything). Errors logged
inside the engine (a server request that failed unexpectedly) still show, as ``fireside: ...``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from contextlib import contextmanager

from ..deps import check_floors
from ..errors import FiresideError
from . import bench, cache, chat, devices, launch, library, mcp, models, remote, server

__all__ = ["build_parser", "main"]

GROUPS = [models, chat, library, server, launch, bench, remote, devices, mcp, cache]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fireside", description="Run and serve local language models.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what the engine is doing")
    parser.add_argument("-V", "--version", action="version", version=version_text(),
                        help="print Fireside's version (and llama.cpp's binding's) and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def version_text() -> str:
    """``fireside 0.1.0 (llama-cpp-python 0.3.36, Python 3.11.9)``: from the installed packages' metadata,
    nothing imported."""
    from importlib.metadata import PackageNotFoundError, version

    def of(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return (f"fireside {of('fireside')} (llama-cpp-python {of('llama_cpp_python')}, "
            f"Python {'.'.join(map(str, sys.version_info[:3]))})")


def log_level(verbose: bool) -> int | None:
    """The level log lines are shown from, or None for the default (errors only, see ``quiet_logs``)."""
    wanted = os.environ.get("FIRESIDE_LOG", "").strip().upper()
    if wanted == "DEBUG":
        return logging.DEBUG
    if verbose or wanted in ("INFO", "VERBOSE", "1"):
        return logging.INFO
    return None


@contextmanager
def quiet_logs(level: int | None):
    """Show log lines from ``level`` up; by default only errors (a request that failed inside a server
    is the user's to see), without timestamps. ``logging.disable`` silences the warnings of libraries
    that print through handlers of their own (huggingface_hub's retries) too; it is lifted on the way
    out, for callers (tests) that run ``main`` in their own process."""
    if level is not None:
        logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s")
        yield
        return
    logging.basicConfig(level=logging.ERROR, format="fireside: %(message)s")
    logging.disable(logging.WARNING)
    try:
        yield
    finally:
        logging.disable(logging.NOTSET)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv, passed_on = launch.split_agent_args(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if passed_on is not None:
        args.agent_args = passed_on
    with quiet_logs(log_level(args.verbose)):
        return _run(parser, args)


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
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
