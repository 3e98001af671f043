"""llama.cpp's rule that a quantized V cache needs flash attention, known to the planner: on auto it is
turned on and said so; forced off, the plan says the model will not load and why. Unit tests on the
planner, then `fireside info` and `fireside run` on the real starter model."""

from __future__ import annotations

import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import plan_fit
from tests.engine.models.test_planner import machine
from tests.helpers.cli import fireside
from tests.helpers.gguf_builder import LLAMA_8B, Q, write_model

REFUSAL = "needs flash attention, which is turned off"


@pytest.fixture(scope="module")
def q8b(tmp_path_factory):
    return inspect_file(write_model(tmp_path_factory.mktemp("kv") / "8b.gguf", LLAMA_8B, weight=Q.Q4_K, output=Q.Q6_K))


@pytest.mark.parametrize("kv_type", ["q4_0", "q8_0"])
def test_quantized_kv_on_auto_turns_flash_attention_on_and_says_so(q8b, kv_type):
    plan = plan_fit(q8b, machine(), LoadOptions(kv_type=kv_type))  # a CPU machine: auto would be off
    assert plan.fits and plan.flash_attn and plan.llama_kwargs()["flash_attn"] is True
    assert any("flash attention turned on" in n and kv_type in n for n in plan.notes)


def test_quantized_kv_with_flash_attention_forced_off_will_not_load(q8b):
    plan = plan_fit(q8b, machine((24, 24)), LoadOptions(kv_type="q4_0", flash_attn=False))
    assert not plan.fits and plan.verdict == "will_not_fit"
    assert REFUSAL in plan.refusal and plan.max_context == 0


def test_f16_kv_has_flash_attention_on_auto_and_off_when_asked(q8b):
    # On by default on CPUs and GPUs alike (as llama-server's auto resolves), so a slot's numerics do not
    # depend on the other slots (runner/batch.py); an f16 cache loads either way.
    assert plan_fit(q8b, machine(), LoadOptions()).flash_attn
    assert plan_fit(q8b, machine((24, 24)), LoadOptions()).flash_attn
    off = plan_fit(q8b, machine(), LoadOptions(flash_attn=False))
    assert not off.flash_attn and off.refusal is None


def test_info_says_flash_attention_is_turned_on_for_q4_0():
    out = fireside("info", "starter", "--kv-type", "q4_0")
    assert out.returncode == 0, out.stderr
    assert "Fit on this machine: runs on the CPU" in out.stdout
    assert "flash attention on" in out.stdout and "note: flash attention turned on" in out.stdout


def test_info_with_flash_attention_off_says_it_will_not_load():
    out = fireside("info", "starter", "--kv-type", "q4_0", "--no-flash-attn")
    assert out.returncode == 0, out.stderr
    assert f"Fit on this machine: will not load: a quantized (q4_0) KV cache {REFUSAL}" in out.stdout


@pytest.mark.model
def test_run_with_a_q4_0_kv_cache_answers():
    out = fireside("run", "starter", "Say hello.", "--kv-type", "q4_0", "--max-tokens", "12", "--seed", "1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()
    assert "Failed to create llama_context" not in out.stderr
    # no fallback for the cache type; on an AMX CPU the load heals its matrix kernels, which is not one
    assert [line for line in out.stderr.splitlines() if "retrying" in line and "extra buffer types" not in line] == []


@pytest.mark.model
def test_run_with_q4_0_and_flash_attention_off_refuses_with_the_reason():
    out = fireside("run", "starter", "Hi", "--kv-type", "q4_0", "--no-flash-attn", "--max-tokens", "4")
    assert out.returncode == 1
    assert REFUSAL in out.stderr and "Traceback" not in out.stderr
