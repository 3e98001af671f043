"""``fireside mcp add|ls|rm|tools|call``: the MCP tool servers whose tools chats may use.

``add NAME -- COMMAND [ARGS...]`` adds a local server that Fireside runs over stdio (spelled as
``claude mcp add`` spells it); it prints the exact command line, because that program will run with
your rights whenever a chat uses its tools. ``add NAME --url URL [--token T]`` adds a Streamable HTTP
server, its token kept in the OS keyring. Servers live in ``mcp.json`` in the config folder, in the
``mcpServers`` shape Claude Desktop, LM Studio and Jan use, so a config from them can be pasted in.
``ls`` starts each server and says whether it answers and with how many tools; ``tools NAME`` lists
a server's tools; ``call NAME TOOL 'JSON'`` runs one tool and prints its result, for debugging a server.
``import [PATH]`` copies the servers of Claude Desktop, LM Studio or Jan.
``fireside chat --tools`` (``ToolChat`` below) offers the tools in a terminal chat, each call shown
with its full arguments and asked about before it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ..errors import McpServerError
from ..mcp import (
    McpConfig,
    McpHub,
    McpServer,
    PendingCall,
    Timeouts,
    ToolLoop,
    ToolStep,
    import_file,
    known_configs,
)
from ..settings import Settings
from ..types import Chunk, Sampling
from .fmt import print_json, table

_ADD_OPTIONS = argparse.ArgumentParser(add_help=False, prog="fireside mcp add")
_ADD_OPTIONS.add_argument("--url", help="the server's Streamable HTTP endpoint, e.g. http://127.0.0.1:9000/mcp")
_ADD_OPTIONS.add_argument("--token", help="bearer token for --url (kept in the OS keyring)")
_ADD_OPTIONS.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                          help="environment for a stdio server (repeatable)")
_ADD_OPTIONS.add_argument("--timeout", type=float, help="seconds a tool call may take (default 120)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mcp", help="add, list and try the MCP tool servers chats can use")
    msub = p.add_subparsers(dest="mcp_command", metavar="ACTION", required=True)
    a = msub.add_parser("add", parents=[_ADD_OPTIONS],
                        help="add (or replace) a server: NAME -- COMMAND [ARGS...], or NAME --url URL",
                        usage="fireside mcp add NAME [--env K=V] -- COMMAND [ARGS...]\n"
                              "       fireside mcp add NAME --url URL [--token TOKEN]")
    a.add_argument("name", help="a short name for the server")
    a.add_argument("command", nargs=argparse.REMAINDER, help="the command that starts a stdio server (after --)")
    a.set_defaults(handler=cmd_add)
    ls = msub.add_parser("ls", help="list servers, whether they start, and how many tools each has")
    ls.add_argument("--no-check", action="store_true", help="do not start the servers")
    ls.add_argument("--json", action="store_true", help="print JSON for scripts")
    ls.set_defaults(handler=cmd_ls)
    rm = msub.add_parser("rm", help="forget a server (and its token)")
    rm.add_argument("name")
    rm.set_defaults(handler=cmd_rm)
    t = msub.add_parser("tools", help="list a server's tools")
    t.add_argument("name")
    t.add_argument("--json", action="store_true", help="print names, descriptions and input schemas as JSON")
    t.set_defaults(handler=cmd_tools)
    i = msub.add_parser("import", help="copy servers from Claude Desktop, LM Studio or Jan (or a JSON file)")
    i.add_argument("path", nargs="?", help="a file with an \"mcpServers\" object (default: every app's file found)")
    i.add_argument("--replace", action="store_true", help="replace servers Fireside already has by that name")
    i.set_defaults(handler=cmd_import)
    c = msub.add_parser("call", help="run one tool and print its result")
    c.add_argument("name")
    c.add_argument("tool")
    c.add_argument("arguments", nargs="?", default="{}", help="the arguments as a JSON object (default {})")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the result")
    c.set_defaults(handler=cmd_call)


def _split_command(args: argparse.Namespace) -> None:
    """Options given after NAME land in the command (argparse's REMAINDER); take them back out, so
    ``add NAME --env K=V -- CMD --flag`` keeps ``--flag`` for CMD and ``--env`` for Fireside."""
    rest = args.command
    if "--" in rest:
        options, args.command = rest[:rest.index("--")], rest[rest.index("--") + 1:]
    elif rest and rest[0].startswith("-"):
        options, args.command = rest, []
    else:
        options = []
    _ADD_OPTIONS.parse_args(options, namespace=args)


def _server_from(args: argparse.Namespace) -> McpServer:
    _split_command(args)
    if bool(args.url) == bool(args.command):
        raise McpServerError("give either a command after -- (a stdio server) or --url URL (Streamable HTTP)")
    if args.token and not args.url:
        raise McpServerError("--token is for --url servers; a stdio server takes --env KEY=VALUE")
    env = {}
    for pair in args.env:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise McpServerError(f"--env wants KEY=VALUE, not {pair!r}")
        env[key] = value
    if args.url:
        return McpServer(name=args.name, url=args.url, timeout_s=args.timeout)
    command = args.command[0]
    if os.sep in command or "/" in command:  # a relative path must not depend on where the app starts
        command = os.path.abspath(command)
    return McpServer(name=args.name, command=command, args=args.command[1:], env=env, timeout_s=args.timeout)


def cmd_add(args: argparse.Namespace) -> int:
    config = McpConfig(Settings.from_env())
    server = config.add(_server_from(args), token=args.token)
    if server.url:
        key = " (token in the OS keyring)" if server.has_token else ""
        print(f"added MCP server {server.name}: {server.url}{key}")
    else:
        print(f"added MCP server {server.name}; when a chat uses its tools, Fireside will run, with your rights:")
        print(f"  {server.describe()}")
    print(f"try it with `fireside mcp tools {server.name}`")
    return 0


def _check(hub: McpHub, server: McpServer) -> tuple[str, int | None]:
    if server.disabled:
        return "disabled", None
    try:
        tools = hub.tools(server.name)
    except McpServerError as exc:
        return f"failed: {exc}", None
    return f"{len(tools)} tool{'s' if len(tools) != 1 else ''}", len(tools)


def cmd_ls(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    config = McpConfig(settings)
    servers = config.list()
    if not servers and not args.json:
        print(f"no MCP servers; add one with `fireside mcp add NAME -- COMMAND` ({config.path})")
        return 0
    with McpHub(settings, config) as hub:
        checks = [("not checked", None) if args.no_check else _check(hub, s) for s in servers]
    if args.json:
        print_json([{"name": s.name, "transport": s.transport, "command": s.describe(), "disabled": s.disabled,
                     "status": status, "tools": count} for s, (status, count) in zip(servers, checks)])
        return 0
    rows = [[s.name, s.transport, s.describe(), status] for s, (status, _) in zip(servers, checks)]
    print(table(rows, ["NAME", "TRANSPORT", "COMMAND OR URL", "STATUS"]))
    return 0


def cmd_rm(args: argparse.Namespace) -> int:
    server = McpConfig(Settings.from_env()).remove(args.name)
    print(f"removed MCP server {server.name} ({server.describe()})")
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    with McpHub(settings) as hub:
        tools = hub.tools(args.name)
    if args.json:
        print_json([{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in tools])
        return 0
    if not tools:
        print(f"{args.name} offers no tools")
    for tool in tools:
        summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
        print(f"{tool.name}  {summary}".rstrip())
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    config = McpConfig(Settings.from_env())
    sources = [("", Path(args.path))] if args.path else known_configs(Path.home())
    if not sources:
        print("found no Claude Desktop, LM Studio or Jan MCP config; give a file: `fireside mcp import PATH`")
        return 0
    for app, path in sources:
        report = import_file(config, path, replace=args.replace)
        print(f"{app + ': ' if app else ''}{path}")
        for name in report.added:
            print(f"  added {name}: {config.get(name).describe()}")
        for name in report.kept:
            print(f"  kept {name}: Fireside already has a server by that name (--replace to take this one)")
        for name, why in report.refused.items():
            print(f"  skipped {name}: {why}")
    print("stdio servers run with your rights when a chat uses them; check the commands above")
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.arguments)
    except ValueError as exc:
        raise McpServerError(f"the arguments are not valid JSON ({exc}): {args.arguments!r}") from None
    if not isinstance(arguments, dict):
        raise McpServerError("the arguments must be a JSON object, e.g. '{\"a\": 1}'")
    with McpHub(Settings.from_env(), timeouts=Timeouts(call_s=args.timeout)) as hub:
        result = hub.call(args.name, args.tool, arguments)
    print(result.text)
    if result.is_error:
        print(f"fireside: {args.tool} reported an error", file=sys.stderr)
        return 1
    return 0


# --- `fireside chat --tools` ---------------------------------------------------------------------
def add_chat_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools (MCP servers from `fireside mcp ls`)")
    g.add_argument("--tools", action="store_true", help="offer the tools of every MCP server; each call is "
                                                        "shown and asked about before it runs")
    g.add_argument("--server", action="append", default=[], metavar="NAME", help="only this server's tools "
                                                                                 "(repeatable)")
    g.add_argument("--max-steps", type=int, default=8, help="rounds of tool calls per reply (default 8)")
    g.add_argument("--tool-choice", default="auto",
                   help="auto, required, or a tool's name to make the model call it first (a grammar forces it)")


def ask_terminal(call: PendingCall, *, read=input, out=None) -> str:
    """The approval prompt: the server, the tool and the full arguments, then run / deny / always."""
    out = out or sys.stderr
    out.write(f"\n[tool call] server {call.server}, tool {call.tool}, arguments:\n")
    out.write("".join(f"  {line}\n" for line in call.pretty_arguments().splitlines()))
    while True:
        out.write("Run it? [y]es, [n]o, [a]lways for this chat: ")
        out.flush()
        try:
            answer = read().strip().lower()
        except EOFError:
            return "deny"
        if answer in ("y", "yes", "n", "no", "a", "always"):
            return {"y": "run", "n": "deny", "a": "always"}[answer[0]]


def _show_step(step: ToolStep) -> None:
    shown = step.content if len(step.content) <= 2000 else step.content[:2000] + f" [... {len(step.content):,} chars]"
    sys.stderr.write(f"[tool {step.outcome}: {step.call.tool}]\n{shown}\n\n")  # plain text, never interpreted
    sys.stderr.flush()


def _show_chunk(chunk: Chunk) -> None:
    if chunk.kind == "text":
        sys.stdout.write(chunk.text)
        sys.stdout.flush()


class ToolChat:
    """The tool side of ``fireside chat --tools``: one hub and one loop for the whole session."""

    def __init__(self, args: argparse.Namespace, runtime: Any):
        settings = Settings.from_env()
        self.hub = McpHub(settings)
        self.choice = _tool_choice(args.tool_choice)
        tools, errors = self.hub.all_tools(args.server or None)
        for error in errors.values():
            print(f"note: {error}", file=sys.stderr)
        print(f"tools: {', '.join(f'{t.server}/{t.name}' for t in tools) or 'none'}", file=sys.stderr)
        self.loop = ToolLoop(runtime, self.hub, tools, ask_terminal, max_steps=args.max_steps,
                             on_chunk=_show_chunk, on_step=_show_step)

    def reply(self, model: str, messages: list[dict], sampling: Sampling) -> list[dict]:
        """Answer ``messages`` with tools; the new messages for the history (none when stopped by Ctrl-C)."""
        cancel = threading.Event()
        try:
            result = self.loop.run(model, messages, sampling, cancel, tool_choice=self.choice)
        except KeyboardInterrupt:
            cancel.set()
            print("\n[stopped]")
            return []
        print()
        if result.hit_step_limit:
            print(f"note: the step limit ({self.loop.max_steps}) was reached", file=sys.stderr)
        return result.messages

    def close(self) -> None:
        self.hub.close()


def _tool_choice(value: str) -> str | dict:
    return value if value in ("auto", "required", "none") else {"type": "function", "function": {"name": value}}
