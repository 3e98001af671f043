"""Loading, unloading and scheduling runners: progress, cancel, several models, idle time-to-live."""

from __future__ import annotations

import threading

import psutil
import pytest

from fireside.engine.errors import LoadCancelled, QueueFull
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.loading import _fallbacks
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until
from tests.helpers.wedged_runner import wedged_runner_command

pytestmark = pytest.mark.model


@pytest.fixture
def make_runtime(tmp_path, smollm2_path):
    made = []

    def make(**kw) -> Runtime:
        rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}), resolver=lambda _: smollm2_path, **kw)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()


def hello(max_tokens: int = 4) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "Hello"}], sampling=Sampling(max_tokens=max_tokens))


def test_load_reports_progress_up_to_done(make_runtime):
    seen = []
    loaded = make_runtime(idle_ttl_s=0).load("a", LoadOptions(context=512), on_progress=seen.append)
    assert seen and seen[-1].fraction == 1.0
    assert [p.fraction for p in seen] == sorted(p.fraction for p in seen)
    assert loaded.n_ctx == 512 and loaded.verdict == "cpu_only" and loaded.rss_bytes > 50_000_000


def test_cancelled_load_says_so_and_leaves_nothing_running(make_runtime):
    rt = make_runtime(idle_ttl_s=0)
    cancel = threading.Event()
    cancel.set()  # the user pressed Cancel before llama.cpp reported any progress
    with pytest.raises(LoadCancelled):
        rt.load("a", LoadOptions(context=512), cancel=cancel)
    assert rt.loaded() == []
    assert rt.load("a", LoadOptions(context=512)).n_ctx == 512  # and a later load works


def test_cancel_ends_a_load_stuck_inside_llama_cpp_and_its_runner_within_seconds(make_runtime):
    """A load that never looks at its cancel event again (a warm-up, a wedged driver) used to leave
    Cancel waiting for good, and the app's quit behind it; its runner is now killed 5 s after being told."""
    rt = make_runtime(idle_ttl_s=0, runner_command=wedged_runner_command())
    cancel, seen, outcome = threading.Event(), [], []

    def load():
        try:
            rt.load("a", LoadOptions(context=512), cancel=cancel, on_progress=seen.append)
        except BaseException as exc:  # noqa: BLE001 - the outcome is what the test asserts
            outcome.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    wait_until(lambda: seen, 60)  # the runner started and reported its first progress
    runners = [p for p in psutil.Process().children() if "wedged_runner" in " ".join(p.cmdline())]
    cancel.set()
    worker.join(30)
    assert not worker.is_alive(), "Cancel did not end the stuck load"
    assert len(outcome) == 1 and isinstance(outcome[0], LoadCancelled), outcome
    assert runners and not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in runners)
    assert rt.loaded() == []


def test_several_models_at_once_and_unload_gives_memory_back(make_runtime):
    rt = make_runtime(idle_ttl_s=0)
    a = rt.load("a", LoadOptions(context=512))
    b = rt.load("b", LoadOptions(context=512))
    assert a.pid != b.pid and {m.model_id for m in rt.loaded()} == {"a", "b"}
    assert rt.unload("a")
    assert not psutil.pid_exists(a.pid) or psutil.Process(a.pid).status() == psutil.STATUS_ZOMBIE
    assert [m.model_id for m in rt.loaded()] == ["b"]


def test_idle_model_unloads_after_its_time_to_live(make_runtime):
    rt = make_runtime(idle_ttl_s=1)
    list(rt.chat("a", hello()))  # loaded just in time
    assert rt.is_loaded("a")
    wait_until(lambda: not rt.is_loaded("a"), 10)
    assert not rt.is_loaded("a")


def test_queue_limit_refuses_past_the_limit(make_runtime):
    rt = make_runtime(idle_ttl_s=0, max_queue=1)
    rt.load("a", LoadOptions(context=512))
    first = rt.chat("a", hello(max_tokens=200))
    next(first)  # the first request now holds the only slot
    with pytest.raises(QueueFull):
        next(rt.chat("a", hello()))
    first.close()  # the caller went away: the slot frees
    assert list(rt.chat("a", hello()))[-1].kind == "done"


def test_a_failed_load_is_retried_smaller_and_says_what_changed(smollm2_path):
    from dataclasses import replace

    from fireside.engine.models import hardware
    from fireside.engine.models.inspection import inspect_file
    from fireside.engine.models.planner import plan_fit

    plan = plan_fit(inspect_file(smollm2_path), hardware.detect(), LoadOptions(context=8192))
    [(smaller, change)] = _fallbacks(plan)
    assert smaller.context == 4096 and change == "a 4,096-token context instead of 8,192"
    steps = _fallbacks(replace(plan, n_gpu_layers=31))
    assert [(p.n_gpu_layers, p.devices, change) for p, change in steps] == [
        (15, None, "15 GPU layers instead of 31"), (0, None, "every layer on the CPU instead of 31 GPU layers"),
        (0, [], "the GPU off")]


def test_plan_matches_what_llama_cpp_reports_allocating(make_runtime):
    """The planner's estimates, set beside the buffer sizes llama.cpp logs while loading."""
    loaded = make_runtime(idle_ttl_s=0).load("a", LoadOptions(context=2048, flash_attn=False))
    cal = loaded.calibration
    assert cal["weights"]["ratio"] == pytest.approx(1.0, abs=0.05)
    assert cal["kv"]["ratio"] == pytest.approx(1.0, abs=0.02)  # 30 layers x 3 heads x 128 x 2 B x 2048
    assert 0.9 <= cal["compute"]["ratio"] <= 1.5  # the estimate may be generous, never far short
