"""A hostile chat template, as a model file from the hub may carry, costs the other clients of the server nothing.

Each template here once froze or bloated the whole server (every route, every client): a quadratic ``sum``
of lists or a huge ``strftime`` format inside one C call that holds the GIL, a 500 KB or 5 MB template
whose parse and compile held it for seconds, list-making filters past the value budgets, nesting that
raised a RecursionError (a 500). Each is written into a copy of the real SmolLM2 GGUF, served by a real
server, and asked for by the official OpenAI client while another client calls ``/api/version`` every
20 ms: that client is answered within 0.5 s throughout (on the first ask, or the second where a busy machine
held it up once: a frozen server freezes on every ask), the server process grows by under 100 MB, and
the chat gets a clear 400 naming the template. A conversation too long for any context is a 400
``context_length_exceeded``, not a 500 (SDKs retry those).
"""

from __future__ import annotations

import threading
import time

import httpx
import openai
import psutil
import pytest

from fireside.engine.library import Library
from fireside.engine.models.inspection import inspect_file
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.models import retemplated

pytestmark = pytest.mark.model

MAX_STALL_S = 0.5
MAX_GROWTH = 100 * 2**20
HOSTILE = {
    "quadratic sum": "{{ (range(100000)|batch(1)|sum(start=[]))|length }}",
    "strftime": "{% for i in range(4) %}{{ strftime_now('%c' * 4000000)|length }}{% endfor %}",
    "batch bomb": "{% set s = 'A' * 4000000 %}{{ (s|batch(1)|list)|length }}",
    "list bomb": "{% set s = 'A' * 8000000 %}" + "".join(f"{{% set l{i} = s|list %}}" for i in range(6))
                 + "{{ l0|length + l5|length }}",
    "500 KB": "{{a}}" * 100_000,
    "5 MB": "{{a}}" * 1_000_000,
    "deep nesting": "{% if 1 %}" * 2000 + "x" + "{% endif %}" * 2000,
    "recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
}
SAYS = {"500 KB": "character limit", "5 MB": "character limit", "deep nesting": "nests too deeply",
        "recursion": "recursed too deeply"}


@pytest.fixture(scope="module")
def served(tmp_path_factory, smollm2_path):
    """A server over a library of SmolLM2 copies, one per hostile template: (base URL, runtime, ids)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("hostile-home"))})
    settings.ensure_dirs()
    library = Library(settings)
    ids = {}
    for n, (name, source) in enumerate(HOSTILE.items()):
        path = settings.models_dir / "local" / f"hostile{n}" / f"hostile{n}.gguf"
        path.parent.mkdir(parents=True)
        ids[name] = library.by_path(retemplated(smollm2_path, path, source)).id
    plain = settings.models_dir / "local" / "plain" / "plain.gguf"
    plain.parent.mkdir(parents=True)
    ids["plain"] = library.by_path(retemplated(smollm2_path, plain, inspect_file(smollm2_path).chat_template)).id
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path)
    thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread.url, runtime, ids
    thread.stop()
    runtime.close()


class Probe(threading.Thread):
    """Another client: calls /api/version every 20 ms, keeping the longest wait (an answer's own time, or a
    gap between loops, which is how a held GIL shows in this process) and the peak size of this process,
    which is the server's."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done = url, threading.Event()
        self.worst, self.calls, self.peak = 0.0, 0, psutil.Process().memory_info().rss
        self.started = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        with httpx.Client(timeout=30) as client:
            last = time.perf_counter()
            while not self.done.is_set():
                client.get(f"{self.url}/api/version").raise_for_status()
                now = time.perf_counter()
                self.worst, self.calls = max(self.worst, now - last), self.calls + 1
                self.peak = max(self.peak, me.memory_info().rss)
                self.started.set()
                time.sleep(0.02)
                last = time.perf_counter()

    def __enter__(self) -> Probe:
        self.start()
        self.started.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.join(30)


@pytest.mark.parametrize("name", HOSTILE.keys())
def test_a_hostile_template_stalls_no_other_client_and_gets_a_clear_400(served, name):
    url, runtime, ids = served
    model = ids[name]
    oai = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
    if name not in SAYS:  # the ones that compile: load the runner first, so only the render is measured
        runtime.load(model)
    try:
        base = psutil.Process().memory_info().rss
        waits = []
        for _ in range(2):  # a freeze comes back on every ask; a busy CI machine's one hiccup does not
            with Probe(url) as probe:
                started = time.perf_counter()
                with pytest.raises(openai.APIStatusError) as refused:
                    oai.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=1)
                took = time.perf_counter() - started
            waits.append(f"{probe.worst:.2f} s (the chat took {took:.1f} s)")
            if probe.worst < MAX_STALL_S:
                break
        assert probe.worst < MAX_STALL_S, f"another client waited {' and then '.join(waits)}"
        assert probe.peak - base < MAX_GROWTH, f"the server grew by {(probe.peak - base) / 2**20:.0f} MiB"
        assert refused.value.status_code == 400, refused.value
        error = refused.value.body
        assert error["code"] == "template_error", error
        assert SAYS.get(name, "budget") in error["message"], error
    finally:
        runtime.unload(model)


@pytest.mark.parametrize("count", [150_000, 200_000])
def test_a_conversation_of_too_many_messages_is_context_length_exceeded(served, count):
    url, runtime, ids = served
    model = ids["plain"]  # SmolLM2's own template
    oai = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": "a"} for i in range(count)]
    try:
        with pytest.raises(openai.BadRequestError) as refused:
            # in extra_body: the client's own per-message type walk takes minutes over 150,000 messages
            oai.chat.completions.create(model=model, messages=messages[:1], max_tokens=1,
                                        extra_body={"messages": messages})
        assert refused.value.body["code"] == "context_length_exceeded", refused.value.body
    finally:
        runtime.unload(model)

