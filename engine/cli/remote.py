"""``fireside remote add|ls|rm``: the OpenAI-compatible engines elsewhere whose models Fireside serves.

``add NAME URL`` keeps the base URL (with or without ``/v1``) and, with ``--api-key``, the key in the
OS keyring; it then asks the remote for its models and says whether it answered (a remote that is
down now is still added). ``ls`` shows each remote, whether it answers and its models, under the ids
to use everywhere (``remote/NAME/MODEL``: ``fireside chat remote/gpu/llama3``, or as ``model`` in any
API call to Fireside's server). ``rm`` forgets a remote and its key.
"""

from __future__ import annotations

import argparse

from ..remote import RemoteEngine, RemoteStatus
from ..settings import Settings
from .fmt import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("remote", help="add, list and remove remote OpenAI-compatible engines")
    rsub = p.add_subparsers(dest="remote_command", metavar="ACTION", required=True)
    a = rsub.add_parser("add", help="add (or replace) a remote engine")
    a.add_argument("name", help="a short name: its models become remote/NAME/MODEL")
    a.add_argument("url", help="base URL, e.g. http://gpu-box:8000 or https://api.example.com/v1")
    a.add_argument("--api-key", help="bearer key for the remote (kept in the OS keyring)")
    a.set_defaults(handler=cmd_add)
    ls = rsub.add_parser("ls", help="list remote engines, whether they answer, and their models")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(handler=cmd_ls)
    rm = rsub.add_parser("rm", help="forget a remote engine and its key")
    rm.add_argument("name")
    rm.set_defaults(handler=cmd_rm)


def _describe(status: RemoteStatus) -> str:
    if status.error:
        return f"not answering: {status.error}"
    return f"{len(status.models)} model{'s' if len(status.models) != 1 else ''}"


def cmd_add(args: argparse.Namespace) -> int:
    engine = RemoteEngine(Settings.from_env())
    try:
        endpoint = engine.registry.add(args.name, args.url, args.api_key)
        status = next(s for s in engine.statuses(fresh=True) if s.endpoint.name == endpoint.name)
    finally:
        engine.close()
    key = " (key in the OS keyring)" if endpoint.has_key else ""
    print(f"added remote {endpoint.name}: {endpoint.base_url}{key}; {_describe(status)}")
    for model in status.models[:10]:
        print(f"  {model.id}")
    if len(status.models) > 10:
        print(f"  ... and {len(status.models) - 10} more (`fireside remote ls`)")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    engine = RemoteEngine(Settings.from_env())
    try:
        statuses = engine.statuses(fresh=True)
    finally:
        engine.close()
    if args.json:
        print_json([{"name": s.endpoint.name, "base_url": s.endpoint.base_url, "has_key": s.endpoint.has_key,
                     "error": s.error or None, "models": [m.id for m in s.models]} for s in statuses])
        return 0
    if not statuses:
        print("no remote engines; add one with `fireside remote add NAME URL`")
        return 0
    rows = [[s.endpoint.name, s.endpoint.base_url, "yes" if s.endpoint.has_key else "no", _describe(s)]
            for s in statuses]
    print(table(rows, ["NAME", "URL", "KEY", "STATUS"]))
    models = [m.id for s in statuses for m in s.models]
    if models:
        print("\nmodels:\n" + "\n".join(f"  {m}" for m in models))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    engine = RemoteEngine(Settings.from_env())
    try:
        endpoint = engine.registry.remove(args.name)
    finally:
        engine.close()
    print(f"removed remote {endpoint.name} ({endpoint.base_url})")
    return 0
