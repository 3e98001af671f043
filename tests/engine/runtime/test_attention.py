"""Attention chosen by measurement (engine/runtime/attention.py), on the real SmolLM2: the first load of an
architecture measures the kinds in the background and remembers the figures; later loads use the
remembered choice without measuring again, and a choice measured in favour of plain f16 attention is
what the next load runs with."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.runtime import attention
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.waiting import wait_until

pytestmark = pytest.mark.model
OPTIONS = LoadOptions(context=512, parallel=1, threads=2)


def loaded_notes(settings: Settings, calibrate: bool) -> tuple[list[str], str]:
    rt = Runtime(settings, idle_ttl_s=0, calibrate=calibrate)
    try:
        loaded = rt.load("starter", OPTIONS)
        chunks = list(rt.chat("starter", ChatRequest([{"role": "user", "content": "Hi"}],
                                                     Sampling(temperature=0, max_tokens=4))))
        if calibrate:
            wait_until(lambda: rt.attention.entries(), 240)  # the background measurement is done
        return loaded.notes, "".join(c.text for c in chunks if c.kind == "text")
    finally:
        rt.close()


def test_the_choice_is_measured_once_remembered_and_reused(tmp_path, monkeypatch, smollm2_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    runs = []
    real = attention.calibrate
    monkeypatch.setattr(attention, "calibrate",
                        lambda path, threads: runs.append(path) or real(path, threads, depths=(0, 128), n=2))
    notes, reply = loaded_notes(settings, calibrate=True)
    assert reply and not any(n.startswith("attention:") for n in notes)  # the first load did not wait for it
    [entry] = attention.Choices(settings.data_dir / "attention.json").entries()
    assert set(entry["figures"]) == set(attention.KINDS) and entry["kind"] in attention.KINDS
    assert all(speed > 0 for f in entry["figures"].values() for speed in f.values())

    notes, reply = loaded_notes(settings, calibrate=True)  # the next load: remembered, not measured again
    assert len(runs) == 1 and reply
    lane = attention.lane(entry["figures"], OPTIONS.context)  # what these figures give this context
    said = (f"attention: q8_0+fa for greedy and seeded replies, {lane[0]} for sampled ones from {lane[1]:,} tokens"
            if lane else "attention: q8_0+fa (")  # no lane: every reply keeps the exact kind
    assert any(n.startswith(said) for n in notes), (notes, entry)


def test_a_remembered_lead_of_plain_attention_gives_sampled_replies_a_lane(tmp_path, smollm2_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    key = attention.model_key(hardware.detect(), inspect_file(smollm2_path), OPTIONS.threads)
    figures = {"q8_0+fa": {"0": 90.0, "1024": 30.0}, "f16+fa": {"0": 85.0, "1024": 20.0},
               "f16": {"0": 88.0, "1024": 60.0}}
    assert attention.Choices(settings.data_dir / "attention.json").remember(key, figures, "starter") == "f16"
    notes, reply = loaded_notes(settings, calibrate=False)
    assert reply
    [note] = [n for n in notes if n.startswith("attention:")]
    # greedy and seeded replies keep the exact kind; sampled ones past the crossing take plain attention
    assert note.startswith("attention: q8_0+fa for greedy and seeded replies, f16 for sampled ones from 256 tokens")
    close = {"q8_0+fa": {"1024": 50.0}, "f16": {"1024": 55.0}}  # not enough faster to give exactness up
    assert attention.choose(close) == "q8_0+fa"


def test_the_lane_starts_where_the_fitted_times_cross():
    # figures like an AMX Xeon's: q8_0+fa 22.0 ms + 8.1 ms per 1k tokens,
    # f16 30.3 ms + 4.1 ms per 1k: 5% ahead from about 2,560 tokens on
    xeon = {"q8_0+fa": {"0": 45.5, "1024": 33.0}, "f16": {"0": 33.0, "1024": 29.0}}
    assert attention.lane(xeon, 8192) == ("f16", 2560)
    assert attention.lane(xeon, 2048) is None  # not within this context
    assert attention.lane({"q8_0+fa": {"0": 45.0, "1024": 40.0}, "f16": {"0": 33.0, "1024": 31.0}}, 8192) is None
    assert attention.lane({"q8_0+fa": {"0": 40.0, "1024": 20.0}, "f16+fa": {"0": 60.0, "1024": 30.0}}, 4096) == ("f16+fa", 0)
    assert attention.lane({"f16": {"0": 60.0, "1024": 30.0}}, 4096) is None  # the exact kind not measured
    assert attention.lane({"q8_0+fa": {"0": 45.0}, "f16": {"0": 60.0}}, 4096) is None  # one depth: no slope


def test_of_two_kinds_ahead_the_lane_takes_the_one_clearly_faster_deep_in():
    # a 2-core EPYC's calibration: f16 flash attention led at 1,024 tokens, plain f16 at 4,096
    epyc = {"q8_0+fa": {"0": 133.6, "1024": 75.2, "4096": 39.6}, "f16+fa": {"0": 133.8, "1024": 81.0, "4096": 50.8},
            "f16": {"0": 117.2, "1024": 71.0, "4096": 56.2}}
    assert attention.lane(epyc, 8192) == ("f16", 1280)  # f16+fa overtakes the exact kind sooner (512)
    assert attention.lane(epyc, 1024) == ("f16+fa", 512)  # plain f16 would only be ahead past this context
    shallow = {k: {d: v for d, v in f.items() if d != "4096"} for k, f in epyc.items()}
    assert attention.lane(shallow, 8192)[0] == "f16+fa"  # measured at 0 and 1,024 only, it looked the other way
    # another calibration here: plain f16 2% ahead at 1,024, which is noise; the first kind ahead keeps the lane
    close = {"q8_0+fa": {"0": 97.0, "1024": 75.0}, "f16+fa": {"0": 100.0, "1024": 86.0}, "f16": {"0": 86.0, "1024": 88.0}}
    assert attention.lane(close, 8192) == ("f16+fa", 256)


FILL = """
import json, sys
import llama_cpp as lc
from fireside.engine.runner import calibration
from fireside.engine.runtime import attention
lc.llama_backend_init()
mp = lc.llama_model_default_params()
mp.use_extra_bufts = False  # as the calibration loads it (AMX kernels crash on batches)
model = lc.llama_model_load_from_file(sys.argv[1].encode(), mp)
kinds = {attention.EXACT: attention.KINDS[attention.EXACT], **attention.KINDS}  # as calibrate passes them
contexts = calibration.contexts_for(model, kinds, 512, 2)
real = calibration.decoder(model, lc.llama_batch_init(512, 0, 1))
decoded = []
def decode(ctx, first, count, logits):
    decoded.append(next(k for k, c in contexts.items() if c is ctx))
    assert real(ctx, first, count, logits) == 0
filled = dict.fromkeys(contexts, 0)
calibration.fill(model, kinds, contexts, filled, 300, decode)
held = {k: lc.llama_memory_seq_pos_max(lc.llama_get_memory(c), 0) + 1 for k, c in contexts.items()}
print(json.dumps({"decoded": sorted(set(decoded)), "held": held, "filled": filled}))
"""


def test_the_calibration_fills_one_cache_and_converts_its_state_for_the_others(smollm2_path):
    """Only the exact kind's cache is filled by decoding; the other kinds take its state converted and
    hold as many cells (a state that did not convert is decoded again: the first check fails)."""
    out = subprocess.run([sys.executable, "-c", FILL, str(smollm2_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["decoded"] == [attention.EXACT], result
    assert result["held"] == dict.fromkeys(attention.KINDS, 300) == result["filled"], result


def test_a_busy_spell_that_ends_between_two_kinds_turns_chooses_nothing():
    """The calibration's kinds take turns, five rounds a depth. A busy spell that covered the first four
    rounds at depth 0 and the exact kind's turn in the fifth (a bench's calibration here: the exact kind read
    97 tok/s, f16 flash attention 135) changes no kind's figure against another's, so the lane is the one
    the quiet machine gives. Keeping each kind's best round, the exact kind's figure came from the spell and
    the others' from after it: plain f16 looked ahead from depth 0, where it is the slowest kind."""
    from fireside.engine.runner.calibration import summarize

    quiet = {"q8_0+fa": {0: 133.0, 1024: 83.0}, "f16+fa": {0: 135.0, 1024: 91.0}, "f16": {0: 105.0, 1024: 92.0}}
    busy = 0.73  # the machine's share left for the calibration during the spell

    def rate(kind: str, depth: int, rnd: int) -> float:
        spell = depth == 0 and (rnd < 4 or kind == "q8_0+fa")
        return quiet[kind][depth] * (busy if spell else 1.0)

    rates = {kind: {d: [rate(kind, d, r) for r in range(5)] for d in figs} for kind, figs in quiet.items()}
    figures = summarize(rates)
    for kind in quiet:  # each kind against the exact one, as the quiet machine has them
        for d in (0, 1024):
            assert figures[kind][str(d)] / figures["q8_0+fa"][str(d)] == pytest.approx(
                quiet[kind][d] / quiet["q8_0+fa"][d], rel=1e-3)
    assert attention.lane(figures, 8192) == ("f16+fa", 512)
    assert attention.lane({k: {str(d): v for d, v in f.items()} for k, f in quiet.items()}, 8192) == ("f16+fa", 512)
    best = {kind: {str(d): max(r) for d, r in by.items()} for kind, by in rates.items()}  # the old way
    assert attention.lane(best, 8192) == ("f16", 0)


def test_figures_measured_the_old_way_are_measured_again(tmp_path):
    path = tmp_path / "attention.json"
    figures = {"q8_0+fa": {"0": 120.0, "1024": 77.0}}
    attention.Choices(path).remember("k", figures, "starter")
    assert attention.Choices(path).get("k")["figures"] == figures
    old = json.loads(path.read_text())
    del old["k"]["method"]  # as method 1 wrote it
    path.write_text(json.dumps(old))
    assert attention.Choices(path).get("k") is None and attention.Choices(path).entries() == []
