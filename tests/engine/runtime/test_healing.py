"""Self-healing loads: a runner that llama.cpp kills by a signal during its load is retried with the next
safer configuration, the user is told what changed, and the machine remembers it.

The crashes are simulated on any machine with the runner's test switch ``FIRESIDE_TEST_RUNNER_CRASH``
(the runner SIGSEGVs itself at its warm-up decode while a listed option is on); on a CPU with AMX and a
build made for it, the real llama.cpp crash (#20824) walks the same path in every model test.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace

import pytest

from fireside.engine.errors import RunnerCrashed
from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import plan_fit
from fireside.engine.runtime import healing
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.cli import fireside

pytestmark = pytest.mark.model


@pytest.fixture
def make_runtime(fireside_home, smollm2_path):
    made = []

    def make() -> Runtime:
        rt = Runtime(Settings.from_env(), resolver=lambda _: smollm2_path, idle_ttl_s=0)
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.close()


def runner_logs(rt: Runtime) -> int:
    return len(list((rt.settings.cache_dir / "logs").glob("runner-*.log")))


def answer(rt: Runtime, model: str = "starter") -> str:
    req = ChatRequest(messages=[{"role": "user", "content": "Say hello"}], sampling=Sampling(max_tokens=8, seed=1))
    return "".join(c.text for c in rt.chat(model, req) if c.kind == "text")


def test_crash_with_extra_buffer_types_heals_tells_and_remembers(make_runtime, monkeypatch):
    monkeypatch.setenv("FIRESIDE_TEST_RUNNER_CRASH", "extra_bufts")
    rt = make_runtime()
    seen = []
    loaded = rt.load("starter", LoadOptions(context=512), on_progress=seen.append)
    # the bar never empties for the retry, and says why it waits; it is full only once loaded
    assert [p.fraction for p in seen] == sorted(p.fraction for p in seen)
    assert any("retrying with the AMX/repack matrix kernels" in p.message for p in seen)
    assert [p.fraction for p in seen].index(1.0) == len(seen) - 1 and seen[-1].message == "loaded"
    assert len(loaded.warnings) == 1
    assert "crashed (SIGSEGV)" in loaded.warnings[0] and "AMX/repack matrix kernels" in loaded.warnings[0]
    assert runner_logs(rt) == 2  # one runner crashed, the second one loaded
    assert answer(rt).strip()
    [entry] = rt.workarounds.entries()
    assert entry["rungs"] == ["extra_bufts"] and entry["model"] == "starter"

    rt2 = make_runtime()  # the next start goes straight to what worked: no crash, one runner
    before = runner_logs(rt2)
    again = rt2.load("starter", LoadOptions(context=512))
    assert runner_logs(rt2) == before + 1
    assert "remembered" in again.warnings[0]
    assert answer(rt2).strip()


def test_ladder_turns_flash_attention_off_after_extra_buffer_types(make_runtime, monkeypatch):
    monkeypatch.setenv("FIRESIDE_TEST_RUNNER_CRASH", "extra_bufts,flash_attn")
    rt = make_runtime()
    loaded = rt.load("starter", LoadOptions(context=512, flash_attn=True))
    assert "flash attention off" in loaded.warnings[0] and "AMX/repack" in loaded.warnings[0]
    assert rt.workarounds.entries()[0]["rungs"] == ["extra_bufts", "flash_attn"]
    assert runner_logs(rt) == 3
    assert answer(rt).strip()


def test_ladder_skips_rungs_that_change_nothing_and_reaches_a_smaller_batch(make_runtime, monkeypatch):
    monkeypatch.setenv("FIRESIDE_TEST_RUNNER_CRASH", "batch")
    rt = make_runtime()  # flash attention is off by choice and there is no GPU: those rungs are skipped
    loaded = rt.load("starter", LoadOptions(context=512, flash_attn=False))
    assert rt.workarounds.entries()[0]["rungs"] == ["extra_bufts", "batch"]
    assert "smaller batch (64 tokens)" in loaded.warnings[0]
    assert runner_logs(rt) == 3


def test_a_crash_no_rung_cures_fails_fast_with_the_runners_last_words(make_runtime, monkeypatch):
    monkeypatch.setenv("FIRESIDE_TEST_RUNNER_CRASH", "always")
    rt = make_runtime()
    started = time.monotonic()
    with pytest.raises(RunnerCrashed) as err:
        rt.load("starter", LoadOptions(context=512))
    assert time.monotonic() - started < 60
    assert "SIGSEGV" in str(err.value) and "its last words" in str(err.value)
    assert rt.workarounds.entries() == []  # nothing worked, so nothing is remembered
    assert rt.loaded() == []


def test_every_rung_of_the_ladder_in_order(smollm2_path):
    plan = plan_fit(inspect_file(smollm2_path), hardware.detect(), LoadOptions(context=512))
    plan = replace(plan, n_gpu_layers=12, flash_attn=True)  # as on a GPU machine
    steps, rungs = [], ()
    while (rungs := healing.next_rungs(plan, rungs)) is not None:
        steps.append(rungs)
    assert steps[-1] == ("extra_bufts", "flash_attn", "gpu", "batch") and len(steps) == 4
    safest = healing.apply(plan, steps[-1])
    assert (safest.n_gpu_layers, safest.flash_attn, safest.n_batch) == (0, False, 64)
    assert healing.load_kwargs(plan, steps[0])["use_extra_bufts"] is False
    assert healing.describe(steps[1]) == "the AMX/repack matrix kernels (extra buffer types) off and flash attention off"


def test_cli_says_what_changed_and_hw_lists_and_clears_the_workaround(fireside_home):
    env = {**os.environ, "FIRESIDE_HOME": str(fireside_home), "FIRESIDE_TEST_RUNNER_CRASH": "extra_bufts"}
    run = fireside("run", "starter", "Say hello", "--max-tokens", "8", "--ctx", "512", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    assert "note: llama.cpp crashed (SIGSEGV) while loading starter" in run.stderr
    hw = fireside("hw", env=env)
    assert "workaround: starter loads with the AMX/repack matrix kernels (extra buffer types) off" in hw.stdout
    assert json.loads(fireside("hw", "--json", env=env).stdout)["workarounds"][0]["rungs"] == ["extra_bufts"]
    cleared = fireside("hw", "--clear-workarounds", env=env)
    assert "forgot 1 workaround" in cleared.stdout
    assert "workaround:" not in fireside("hw", env=env).stdout


def test_a_runner_that_dies_before_it_starts_fails_at_once_with_its_last_words(tmp_path):
    from fireside.engine.runtime.client import RunnerClient

    command = [sys.executable, "-c", "import sys; print('libggml: illegal instruction in cpu probe', file=sys.stderr);"
               " sys.exit(3)"]
    started = time.monotonic()
    with pytest.raises(RunnerCrashed) as err:
        RunnerClient("broken", tmp_path / "logs", command=command)
    assert time.monotonic() - started < 10
    assert "exited with code 3 before it started" in str(err.value)
    assert "illegal instruction in cpu probe" in str(err.value)
