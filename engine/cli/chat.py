"""``fireside chat``, ``fireside run`` and ``fireside ps``: talk to a model from a terminal.

``chat`` streams replies as they decode; a line ending in ``\\`` continues on the next line, and a
line of ``\"\"\"`` opens and closes a multi-line block. ``/system TEXT`` sets the system prompt,
``/clear`` starts over, ``/bye`` (or Ctrl-D) leaves. Ctrl-C during a reply stops that reply and keeps
the conversation. ``--tools`` offers the tools of the MCP servers (``fireside mcp``), each call
asked about first. ``run`` prints one reply for scripts. ``ps`` asks a running Fireside server which
models it has loaded.
"""

from __future__ import annotations

import argparse
import sys
import threading

import httpx

from ..facade import Engine
from ..fmt import draft_share, human_bytes
from ..models import LoadOptions
from ..settings import Settings
from ..types import ChatRequest, Sampling, Usage
from .fmt import table
from .mcp import ToolChat, add_chat_options
from .models import add_load_options, load_options

HELP = "Commands: /system TEXT, /clear, /bye. End a line with \\ to continue it; \"\"\" opens a block."


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chat", help="chat with a model in the terminal")
    p.add_argument("model", nargs="?", default="starter", help="library id, .gguf path or `starter` (default)")
    p.add_argument("--system", help="system prompt")
    _add_sampling(p)
    add_load_options(p)
    add_chat_options(p)
    p.set_defaults(handler=cmd_chat)

    p = sub.add_parser("run", help="print one reply to a prompt (for scripts)")
    p.add_argument("model")
    p.add_argument("prompt", nargs="?", help="the prompt (default: read standard input)")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--stats", action="store_true", help="print tokens/s and time to first token to stderr")
    _add_sampling(p)
    add_load_options(p)
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser("ps", help="list the models a running Fireside server has loaded")
    p.set_defaults(handler=cmd_ps)


def _add_sampling(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling")
    g.add_argument("--temperature", type=float, default=0.7)
    g.add_argument("--top-p", type=float, default=0.95)
    g.add_argument("--top-k", type=int, default=40)
    g.add_argument("--min-p", type=float, default=0.05)
    g.add_argument("--repeat-penalty", type=float, default=1.1)
    g.add_argument("--seed", type=int)
    g.add_argument("--max-tokens", type=int)
    g.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")


def _sampling(args: argparse.Namespace) -> Sampling:
    return Sampling(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k, min_p=args.min_p,
                    repeat_penalty=args.repeat_penalty, seed=args.seed, max_tokens=args.max_tokens, stop=args.stop)


def _start(args: argparse.Namespace) -> tuple[Engine, LoadOptions]:
    engine = Engine(Settings.from_env(), idle_ttl_s=0)
    opts = load_options(args)
    last = [-1]

    def progress(p) -> None:
        pct = int(p.fraction * 100)
        if pct != last[0] and sys.stderr.isatty():
            last[0] = pct
            print(f"\rloading {args.model}: {pct:3d}%", end="", file=sys.stderr, flush=True)

    loaded = engine.load(args.model, opts, on_progress=progress)
    if sys.stderr.isatty():
        print("\r" + " " * 40 + "\r", end="", file=sys.stderr)
    for warning in loaded.warnings:
        print(f"note: {warning}", file=sys.stderr)
    return engine, opts


def _stream(engine: Engine, model: str, request: ChatRequest, out=None) -> tuple[str, Usage | None]:
    """Print a reply as it streams; Ctrl-C stops it (the runner is told at once) and keeps what came."""
    out = out or sys.stdout  # looked up per call, so redirected stdout is honoured
    cancel = threading.Event()
    stream = engine.chat(model, request, cancel=cancel)
    text, usage = [], None
    try:
        for chunk in stream:
            if chunk.kind == "text":
                text.append(chunk.text)
                out.write(chunk.text)
                out.flush()
            elif chunk.kind == "reasoning" and out.isatty():
                out.write(f"\x1b[2m{chunk.text}\x1b[0m")
            elif chunk.kind == "done":
                usage = chunk.usage
    except KeyboardInterrupt:
        cancel.set()
        stream.close()
        out.write("\n[stopped]")
    out.write("\n")
    out.flush()
    return "".join(text), usage


def _read_prompt() -> str | None:
    """One user turn from the terminal; None at end of input."""
    try:
        line = input(">>> ")
    except EOFError:
        return None
    if line.strip() == '"""':
        lines = []
        while (more := input("... ")).strip() != '"""':
            lines.append(more)
        return "\n".join(lines)
    lines = [line]
    while lines[-1].endswith("\\"):
        lines[-1] = lines[-1][:-1]
        lines.append(input("... "))
    return "\n".join(lines)


def cmd_chat(args: argparse.Namespace) -> int:
    engine, _ = _start(args)
    tools = None
    system = args.system
    history: list[dict] = []
    try:
        tools = ToolChat(args, engine) if args.tools else None
        print(f"Chatting with {args.model}. {HELP}", file=sys.stderr)
        while True:
            try:
                prompt = _read_prompt()
            except KeyboardInterrupt:
                print(file=sys.stderr)
                continue
            if prompt is None or prompt.strip() == "/bye":
                return 0
            if prompt.startswith("/system"):
                system = prompt[len("/system"):].strip() or None
                print(f"system prompt {'set' if system else 'cleared'}", file=sys.stderr)
                continue
            if prompt.strip() == "/clear":
                history = []
                print("conversation cleared", file=sys.stderr)
                continue
            if not prompt.strip():
                continue
            history.append({"role": "user", "content": prompt})
            messages = ([{"role": "system", "content": system}] if system else []) + history
            if tools:
                history += tools.reply(args.model, messages, _sampling(args))
                continue
            reply, _ = _stream(engine, args.model, ChatRequest(messages=messages, sampling=_sampling(args)))
            history.append({"role": "assistant", "content": reply})
    finally:
        if tools:
            tools.close()
        engine.close()


def cmd_run(args: argparse.Namespace) -> int:
    prompt = args.prompt if args.prompt is not None else sys.stdin.read()
    engine, _ = _start(args)
    try:
        messages = ([{"role": "system", "content": args.system}] if args.system else [])
        messages.append({"role": "user", "content": prompt})
        _, usage = _stream(engine, args.model, ChatRequest(messages=messages, sampling=_sampling(args)))
        if args.stats and usage:
            threads = next((m.threads_label() for m in engine.loaded() if m.model_id == args.model), "")
            drafts = draft_share(usage.draft_tokens, usage.accepted_draft_tokens)
            extra = "".join(f", {part}" for part in (drafts, threads) if part)
            print(f"{usage.completion_tokens} tokens, {usage.decode_tokens_per_s:.1f} tokens/s, "
                  f"first token after {usage.ttft_s * 1000:.0f} ms{extra}", file=sys.stderr)
        return 0
    finally:
        engine.close()


def cmd_ps(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    url = f"http://{settings.host}:{settings.port}/api/ps"
    try:
        models = httpx.get(url, timeout=5).json().get("models", [])
    except httpx.HTTPError:
        print(f"no Fireside server answers at {url}: nothing is loaded (start one with `fireside serve`)")
        return 0
    rows = []
    for m in models:
        size, vram = m.get("size", 0), m.get("size_vram", 0)
        gpu = round(100 * vram / size) if size else 0
        where = "100% CPU" if gpu == 0 else "100% GPU" if gpu == 100 else f"{100 - gpu}%/{gpu}% CPU/GPU"
        rows.append([m.get("name", "?"), human_bytes(size), where, str(m.get("context_length", "")),
                     m.get("threads") or "-", m.get("draft") or "-", m.get("expires_at", "")])
    print(table(rows, ["NAME", "SIZE", "PROCESSOR", "CONTEXT", "THREADS", "DRAFT", "UNTIL"]) if rows else "no models loaded")
    return 0
