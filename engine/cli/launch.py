"""``fireside launch AGENT [--model M]``: a coding agent (Claude Code, Codex CLI, opencode) on a local model.

One sequence: find the agent's program; find the server at ``--url`` (by default this machine's own,
where ``fireside serve`` and the app listen), or start one of our own on a free loopback port, stopped
when the agent exits; make sure the model is loaded with a context the agent can work in (``agents.py``
says how much: its first request is measured), refusing with the numbers when the model was trained on
less, when this machine's memory cannot hold that context, or when the server found has the model
loaded with less; then run the agent with its settings in a temporary home pointing at the server
(the user's own settings are not touched), arguments after ``--`` passed on to it. While the agent runs,
Ctrl-C is the agent's. The server it starts logs each request (``--verbose``); when the agent fails or launch
is stopped, that log is copied out of the temporary home into the logs folder, and launch says where.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from ..agents import AGENTS, Agent, configure, context_for, refusal
from ..errors import FiresideError
from ..library import resolve_model
from ..models import LoadOptions, hardware, inspect_file, plan_fit
from ..procs import stop_process
from ..settings import Settings
from .models import describe_plan

START_TIMEOUT_S = 300  # loading a large model from a slow disk
LOAD_TIMEOUT_S = 600
SLOTS = 2
# the server launch starts keeps its KV cache in f16: an agent's first request is a prompt of 7.5k-22.6k
# tokens, which the exact q8_0 cache evaluates 2.3x slower at 8k tokens and slower still past it (the
# starter on a 2-core EPYC: 8,192 tokens in 154 s against 66 s); an agent does not rely on a reply
# being the same every time, a person waiting for its first answer notices (issue 43's 22.6k-token request)
AGENT_KV = "f16"


class LaunchRefused(FiresideError):
    """The agent cannot be run on this model, server or machine; the message says why, in numbers."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("launch", help="run a coding agent (claude, codex, opencode) on a local model",
                       description="Run Claude Code, Codex CLI or opencode against Fireside, set up for a local "
                                   "model; your own settings for the agent are left as they are.")
    p.add_argument("agent", choices=sorted(AGENTS), help="the agent to run")
    p.add_argument("--model", default="starter", help="the model it works with (default: starter)")
    p.add_argument("--url", help="a Fireside server that is already running (default: this machine's, "
                                 "http://127.0.0.1:PORT from the settings; if none answers, one is started)")
    p.add_argument("--api-key", default=os.environ.get("FIRESIDE_API_KEY"),
                   help="the server's API key, if it needs one (default: $FIRESIDE_API_KEY)")
    p.add_argument("--ctx", type=int, help="load with this context instead of the size the agent needs")
    p.epilog = "Arguments after -- go to the agent itself: fireside launch claude -- -p 'Explain this repo'"
    p.set_defaults(handler=cmd_launch, agent_args=[])


def split_agent_args(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``fireside launch AGENT [OPTIONS] -- AGENT_ARGS``: the command line for the parser, and the
    agent's own arguments (None for other commands). Taken off before parsing, since argparse cannot
    put what follows ``--`` after options into one list."""
    at = argv.index("launch") if "launch" in argv else -1
    if at < 0 or "--" not in argv[at:]:
        return argv, None
    cut = argv.index("--", at)
    return argv[:cut], argv[cut + 1:]


def cmd_launch(args: argparse.Namespace) -> int:
    agent = AGENTS[args.agent]
    program = shutil.which(agent.command)
    if program is None:
        raise LaunchRefused(f"{agent.title} is not installed (no `{agent.command}` on PATH): install it with "
                            f"`npm install -g {agent.package}`")
    settings = Settings.from_env()
    url = (args.url or f"http://127.0.0.1:{settings.port}").rstrip("/")
    with _ended_by_signals(), tempfile.TemporaryDirectory(prefix=f"fireside-{agent.name}-") as home:
        server = None
        if not _answers(url, args.api_key):
            if args.url:
                raise LaunchRefused(f"no Fireside server answers at {url}")
            n_ctx, kv = _planned_context(agent, args.model, args.ctx, settings)
            server, url = _start_server(args.model, n_ctx, kv, Path(home), args.api_key)
        code = None
        try:
            n_ctx = _loaded_context(agent, url, args.api_key, args.model, args.ctx)
            env = {**os.environ, **configure(agent, Path(home) / "agent", url, args.api_key, args.model, n_ctx)}
            print(f"fireside: {agent.title} on {args.model} ({n_ctx:,} tokens of context) at {url}", file=sys.stderr)
            code = _run_agent([program, *args.agent_args], env)
            return code
        finally:
            if server is not None:
                stop_process(server, grace_s=30)
                if code != 0:  # the agent failed or launch was stopped: its server's log outlives the folder
                    _keep_log(Path(home) / "serve.log", settings, agent)


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end launch through its ``finally`` blocks, as Ctrl-C does:
    the agent is killed and the server launch started stops (it runs in a session of its own, keeps its
    model loaded for good and would otherwise go on using the CPU with nobody to talk to)."""
    def end(signum: int, _frame) -> None:
        raise SystemExit(128 + signum)

    wanted = [signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous = {s: signal.signal(s, end) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _planned_context(agent: Agent, model: str, ctx: int | None, settings: Settings) -> tuple[int, str]:
    """The context and KV cache type to start a server with for ``agent``: ``AGENT_KV`` where it fits, else
    the planner's own (q8_0, half the size); refused with the numbers when the model was trained on too
    little (unless ``--ctx`` says otherwise) or when memory cannot hold it."""
    info = inspect_file(resolve_model(model, settings))
    if ctx is None:
        why = refusal(agent, info.context_length, model)
        if why:
            raise LaunchRefused(why)
        ctx = context_for(agent, info.context_length)
    elif ctx < agent.need:
        raise LaunchRefused(f"--ctx {ctx:,} is too small for {agent.title}: its first request alone is about "
                            f"{agent.first_request:,} tokens ({agent.measured}); it needs at least {agent.need:,}")
    elif ctx > info.context_length:
        print(f"fireside: warning: {model} was trained on {info.context_length:,} tokens; --ctx {ctx:,} goes past it",
              file=sys.stderr)
    hw = hardware.detect()
    if plan_fit(info, hw, LoadOptions(context=ctx, kv_type=AGENT_KV)).fits:
        return ctx, AGENT_KV
    plan = plan_fit(info, hw, LoadOptions(context=ctx))
    if not plan.fits:
        raise LaunchRefused(f"{model} with {ctx:,} tokens of context (what {agent.title} needs) does not fit in this "
                            f"machine's memory:\n{describe_plan(plan)}")
    return ctx, plan.kv_type


def _headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _answers(url: str, key: str | None) -> bool:
    """Whether a Fireside server answers at ``url`` (a wrong key is said at once, not taken for none)."""
    try:
        r = httpx.get(f"{url}/api/ps", headers=_headers(key), timeout=3)
    except httpx.HTTPError:
        return False
    if r.status_code == 401:
        said = r.json().get("error", r.text) if r.headers.get("content-type", "").startswith("application/json") else r.text
        asked = "refused the API key given" if key else "needs an API key: pass --api-key or set FIRESIDE_API_KEY"
        raise LaunchRefused(f"the server at {url} {asked} ({said})")
    return r.status_code == 200


def _loaded_context(agent: Agent, url: str, key: str | None, model: str, ctx: int | None) -> int:
    """Load ``model`` on the server (if it is not yet) and return its context, refused when it is less
    than the agent needs."""
    r = httpx.post(f"{url}/api/generate", json={"model": model, "prompt": "", "stream": False},
                   headers=_headers(key), timeout=LOAD_TIMEOUT_S)
    if r.status_code != 200:
        raise LaunchRefused(f"the server at {url} could not load {model}: {r.text}")
    loaded = httpx.get(f"{url}/api/ps", headers=_headers(key), timeout=10).json().get("models", [])
    n_ctx = next((m.get("context_length") for m in loaded if model in (m.get("name"), m.get("model"))), None)
    if n_ctx is None:  # listed under another name (a path, an alias): the server's own checks will do
        return ctx or agent.need
    if n_ctx < (ctx or agent.need):
        raise LaunchRefused(f"the server at {url} has {model} loaded with {n_ctx:,} tokens of context, but "
                            f"{agent.title}'s first request alone is about {agent.first_request:,} tokens "
                            f"({agent.measured}): it needs at least {agent.need:,}. Restart the server with "
                            f"`fireside serve --ctx {context_for(agent, agent.need)}`, or stop it and let "
                            f"`fireside launch` start one")
    return n_ctx


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_server(model: str, n_ctx: int, kv: str, home: Path, key: str | None) -> tuple[subprocess.Popen, str]:
    """``fireside serve`` on a free loopback port with ``model`` loaded at ``n_ctx`` on a ``kv`` cache, in its own session
    (Ctrl-C in the agent's terminal does not reach it); its log goes to ``home``. It asks for the key
    stored in the keyring, if there is one, as ``fireside serve`` does."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = home / "serve.log"
    print(f"fireside: starting a server at {url} with {model} at {n_ctx:,} tokens of context (log: {log})",
          file=sys.stderr)
    if kv == AGENT_KV:
        print(f"fireside: its KV cache is {kv}, which evaluates the agent's long prompts faster than the exact q8_0 "
              "(a reply may differ from one time to the next)", file=sys.stderr)
    with log.open("wb") as out:  # two slots: the agent's turn and its background requests (titles, summaries)
        proc = subprocess.Popen([sys.executable, "-m", "fireside.engine", "--verbose", "serve", "--port", str(port),
                                 "--ctx", str(n_ctx), "--kv-type", kv, "--parallel", str(SLOTS), "--load", model,
                                 "--keep-alive", "-1"],
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while not _answers(url, key):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise LaunchRefused(f"the server did not start:\n{log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
    except BaseException:  # a refused key, Ctrl-C: the server started in its own session stops here too
        stop_process(proc, grace_s=30)
        raise
    return proc, url


def _keep_log(log: Path, settings: Settings, agent: Agent) -> None:
    """Copy the server's log out of launch's temporary folder into the logs folder, and say where."""
    kept = settings.cache_dir / "logs" / f"launch-{agent.name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, kept)
    except OSError:
        return  # no log was written (the server never started), or nowhere to keep it: nothing to point at
    print(f"fireside: the server's log is kept at {kept}", file=sys.stderr)


def _run_agent(argv: list[str], env: dict[str, str]) -> int:
    """Run the agent in this terminal; Ctrl-C is its to handle while it runs."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.run(argv, env=env).returncode
    finally:
        signal.signal(signal.SIGINT, previous)
