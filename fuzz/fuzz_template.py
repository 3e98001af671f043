"""Fuzz chat templates against a real server: hostile templates never make a 5xx or stall another client.

    nice -n 10 python fuzz/fuzz_template.py [--minutes 10] [--seed 1] [--keep DIR]

A malicious GGUF on the hub carries a chat template; this builds such templates at random from what the
sandbox offers (every filter, test and global of the template environment, with argument values from
tiny to huge, chained, looped over, nested, recursed, repeated into large sources) and serves each as
the chat template of a loaded SmolLM2 (the runtime's template for that model is swapped in place, as a
load would set it, so no runner starts per case), asked for through the OpenAI dialect. Meanwhile
another client calls ``/api/version`` every 20 ms and the server process's size is sampled. Prints
how many templates, the answers by status and code, the slowest chat, the longest wait of the other
client (and, from a 2 s window every 10 cases with no template running, how long the machine's own load
made it wait), and the server's largest growth. A case that answers 5xx or stalls the other client over 0.5 s
is written to ``--keep`` (default: a temporary folder) and the run ends with exit code 1.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from fireside.engine.errors import FiresideError  # noqa: E402
from fireside.engine.library import Library  # noqa: E402
from fireside.engine.prompts import templates  # noqa: E402
from fireside.engine.runtime.runtime import Runtime  # noqa: E402
from fireside.engine.server import ServerThread, create_app  # noqa: E402
from fireside.engine.settings import Settings  # noqa: E402
from tests.helpers.models import smollm2_file  # noqa: E402

MAX_STALL_S = 0.5
SIZES = [0, 1, 2, 7, 100, 1000, 100_000, 1_000_000, 4_000_000, 10**9, -1]
SEEDS = ["range({n})", "'A' * {n}", "messages", "[1] * {n}", "messages[0].content", "'%c'", "dict(a={n})",
         "tools", "'x\\n' * {n}", "[[1] * 100] * {n}", "'{{:>{n}}}'", "ns.x", "(messages * {n})"]
ARGS = ["", "({n})", "({n}, 'x')", "(start=[])", "(start='')", "('A' * {n})", "('A', 'B' * {n})",
        "('upper')", "(attribute='content')", "(indent={n})", "(width={n})", "(true)", "('content')"]


class Probe(threading.Thread):
    """Another client: /api/version every 20 ms; the longest wait (an answer, or a gap between loops, which
    is how a held GIL shows in this process) and the server process's peak size."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done, self.lock = url, threading.Event(), threading.Lock()
        self.worst, self.peak, self.calls = 0.0, 0, 0

    def take(self) -> tuple[float, int]:
        """The worst wait and peak size since the last take."""
        with self.lock:
            out = (self.worst, self.peak)
            self.worst, self.peak = 0.0, 0
        return out

    def run(self) -> None:
        me = psutil.Process()
        with httpx.Client(timeout=60) as client:
            last = time.perf_counter()
            while not self.done.is_set():
                client.get(f"{self.url}/api/version").raise_for_status()
                now = time.perf_counter()
                with self.lock:
                    self.worst, self.calls = max(self.worst, now - last), self.calls + 1
                    self.peak = max(self.peak, me.memory_info().rss)
                time.sleep(0.02)
                last = time.perf_counter()


class Maker:
    """Random hostile templates from the environment's own filters, tests and globals."""

    def __init__(self, rng: random.Random):
        env = templates._ENV
        self.rng = rng
        self.filters = sorted(n for n in env.filters if not n.startswith("fireside_"))
        self.tests = sorted(env.tests)
        self.globals = sorted(env.globals)

    def n(self) -> int:
        return self.rng.choice(SIZES)

    def expr(self, depth: int = 0) -> str:
        r = self.rng
        if depth < 2 and r.random() < 0.25:
            base = f"({self.expr(depth + 1)} {r.choice(['+', '*', '~', '%'])} {self.expr(depth + 1)})"
        elif r.random() < 0.2:
            base = self.call_global()
        else:
            base = r.choice(SEEDS).format(n=self.n())
        for _ in range(r.randint(0, 4)):
            base = f"({base}|{r.choice(self.filters)}{r.choice(ARGS).format(n=self.n())})"
        if r.random() < 0.2:
            method = r.choice(["center", "ljust", "replace", "join", "format", "split", "expandtabs", "zfill"])
            base = f"({base}).{method}({self.n()})" if method != "replace" else f"({base}).replace('A', 'AA')"
        return base

    def call_global(self) -> str:
        name = self.rng.choice(self.globals)
        if name == "strftime_now":
            return f"strftime_now('%c' * {self.n()})"
        if name == "raise_exception":
            return "raise_exception('no')"
        return f"{name}({self.n()})"

    def statement(self, depth: int = 0) -> str:
        r = self.rng
        kind = r.randrange(12)
        if kind == 0 and depth < 3:
            return f"{{% for i in {self.expr()} %}}{self.statement(depth + 1)}{{% endfor %}}"
        if kind == 1:
            test = r.choice(self.tests)
            return f"{{% if {self.expr()} is {test} %}}{self.statement(depth + 1) if depth < 3 else 'y'}{{% endif %}}"
        if kind == 2:
            return (f"{{% for i in range({self.n()}) %}}{{% set ns.x = ns.x {r.choice(['~', '+', '*'])} "
                    f"{r.choice(['ns.x', '2', self.expr()])} %}}{{% endfor %}}{{{{ ns.x|length }}}}")
        if kind == 3:
            return "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
        if kind == 4:
            deep = r.choice([10, 200, 1000, 3000])
            return "{% if 1 %}" * deep + "{{ 1 }}" + "{% endif %}" * deep
        if kind == 5:
            return f"{{% set s = {self.expr()} %}}{{{{ (s|{r.choice(self.filters)}|list)|length }}}}"
        return f"{{{{ {self.expr()} }}}}"

    def template(self) -> str:
        body = "".join(self.statement() for _ in range(self.rng.randint(1, 3)))
        source = "{% set ns = namespace(x='A') %}" + body
        if self.rng.random() < 0.05:  # a large source: compile time and memory
            source *= self.rng.choice([1000, 20_000, 200_000]) // max(len(source) // 5, 1) + 1
        return source + "{% for m in messages %}{{ m.content }}{% endfor %}"


def serve(home: Path) -> tuple[str, Runtime, str, ServerThread]:
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    library = Library(settings)
    model = library.by_path(smollm2_file()).id
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    thread.start()
    runtime.load(model)
    return thread.url, runtime, model, thread


def one_case(client: httpx.Client, url: str, runtime: Runtime, model: str, source: str) -> tuple[str, float]:
    """Swap the template in, ask for a chat; what came back ("200", "400 template_error", ...) and how long."""
    started = time.perf_counter()
    try:
        runtime._slots[model].template = templates.ChatTemplate(source)  # what a load of such a file sets
    except FiresideError as exc:  # a load of such a file fails the same way: a 400 naming the template
        return f"load refused: {type(exc).__name__}", time.perf_counter() - started
    r = client.post(f"{url}/v1/chat/completions", json={
        "model": model, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]})
    took = time.perf_counter() - started
    if r.status_code == 200:
        return "200", took
    return f"{r.status_code} {r.json().get('error', {}).get('code')}", took


def main() -> int:  # noqa: PLR0915
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    keep = args.keep or Path(tempfile.mkdtemp(prefix="fuzz-template-"))
    keep.mkdir(parents=True, exist_ok=True)
    maker = Maker(random.Random(args.seed))
    with tempfile.TemporaryDirectory() as home:
        url, runtime, model, thread = serve(Path(home))
        probe = Probe(url)
        probe.start()
        base = psutil.Process().memory_info().rss
        answers: collections.Counter = collections.Counter()
        worst_stall, worst_case, growth, bad, cases, quiet, slowest = 0.0, 0.0, 0, 0, 0, 0.0, ""
        deadline = time.monotonic() + args.minutes * 60
        with httpx.Client(timeout=120) as client:
            while time.monotonic() < deadline:
                source = maker.template()
                probe.take()
                answer, took = one_case(client, url, runtime, model, source)
                time.sleep(0.05)  # one more probe after the answer
                stall, peak = probe.take()
                cases += 1
                answers[answer] += 1
                worst_stall = max(worst_stall, stall)
                if took > worst_case:
                    worst_case, slowest = took, f"{answer}, a {len(source):,}-character template"
                growth = max(growth, peak - base)
                if cases % 10 == 0:  # a window with no template running: how long this machine's load alone
                    time.sleep(2.0)     # keeps the other client waiting
                    quiet = max(quiet, probe.take()[0])
                if answer.startswith("5") or stall > MAX_STALL_S:
                    bad += 1
                    (keep / f"case{cases}.jinja").write_text(source)
                    print(f"case {cases}: {answer}, other client waited {stall:.2f} s; kept", flush=True)
        probe.done.set()
        thread.stop()
        runtime.close()
    figures = {"minutes": args.minutes, "templates": cases, "answers": dict(answers.most_common()),
               "slowest_chat_s": round(worst_case, 2), "slowest_chat": slowest, "other_client_worst_wait_s": round(worst_stall, 3),
               "other_client_worst_wait_with_no_template_running_s": round(quiet, 3),
               "server_growth_mib": round(growth / 2**20, 1), "version_calls": probe.calls, "bad": bad}
    print(json.dumps(figures, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
