"""The one entry point of the frozen Fireside bundle: the app, the ``fireside`` command and the model
runners all start from the same executable, chosen by the first argument or the name it was called by.

- ``--fireside-runner``: a runner process (``fireside.engine.runtime.client.runner_command()`` starts
  runners this way when ``sys.frozen`` is set).
- ``--fireside-check-grammar``: a short-lived grammar check (``fireside.engine.structured.grammarcheck``).
- ``--fireside-template-worker``: a chat template worker (``fireside.engine.prompts.worker``).
- ``--fireside-document-reader``: a document reader process (``fireside.engine.documents.reader_process``).
- ``--fireside-rpc-worker``: the worker that lends this machine's memory (``fireside.engine.rpc.worker``).
- ``--cli ARGS...``, or called as ``fireside`` (the ``/usr/bin/fireside`` link on Linux): the
  ``fireside`` command line.
- ``--app``, or anything else (double-click, ``fireside-app``, ``Fireside.exe``): the desktop app.

The name test is case-sensitive on purpose: the executable itself is ``Fireside``, so only a link or
copy named ``fireside`` opens the command line.
"""

from __future__ import annotations

import ntpath
import sys

RUNNER_FLAG = "--fireside-runner"
GRAMMAR_FLAG = "--fireside-check-grammar"
TEMPLATE_FLAG = "--fireside-template-worker"
READER_FLAG = "--fireside-document-reader"
RPC_WORKER_FLAG = "--fireside-rpc-worker"
CLI_FLAG = "--cli"
APP_FLAG = "--app"
CLI_NAME = "fireside"


def choose(argv: list[str]) -> tuple[str, list[str]]:
    """Which mode ``argv`` asks for ("runner", "cli" or "app") and the arguments left for it."""
    first = argv[1] if len(argv) > 1 else ""
    if first == RUNNER_FLAG:
        return "runner", argv[2:]
    if first == GRAMMAR_FLAG:
        return "grammar", argv[2:]
    if first == TEMPLATE_FLAG:
        return "template", argv[2:]
    if first == READER_FLAG:
        return "reader", argv[2:]
    if first == RPC_WORKER_FLAG:
        return "rpc-worker", argv[2:]
    if first == CLI_FLAG:
        return "cli", argv[2:]
    if first == APP_FLAG:
        return "app", argv[2:]
    name = ntpath.basename(argv[0]) if argv else ""  # ntpath splits on either slash
    if name.removesuffix(".exe") == CLI_NAME:
        return "cli", argv[1:]
    return "app", argv[1:]


def main() -> int:
    mode, rest = choose(sys.argv)
    if mode == "runner":
        from fireside.engine.runner import process

        process.main()  # ends the process itself
        return 0
    if mode == "grammar":
        from fireside.engine.structured import grammarcheck

        return grammarcheck.main()
    if mode == "template":
        from fireside.engine.prompts import worker

        worker.main()
        return 0
    if mode == "reader":
        from fireside.engine.documents import reader_process

        reader_process.main()  # reads until its pipe closes, then ends the process itself
        return 0
    if mode == "rpc-worker":
        from fireside.engine.rpc import worker

        worker.main(rest)  # serves until it is stopped
        return 0
    if mode == "cli":
        from fireside.engine.cli import main as cli_main

        return cli_main(rest)
    from fireside.app.main import main as app_main

    return app_main([sys.argv[0], *rest])


if __name__ == "__main__":
    sys.exit(main())
