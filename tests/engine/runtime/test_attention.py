"""Attention chosen by measurement (engine/runtime/attention.py), on the real SmolLM2: the first load of an
architecture measures the kinds in the background and remembers the figures; later loads use the
remembered choice without measuring again, and a choice measured in favour of plain f16 attention is
what the next load runs with."""

from __future__ import annotations

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
    assert any(n.startswith(f"attention: {entry['kind']} (") for n in notes)


def test_a_remembered_choice_of_plain_attention_is_what_the_next_load_uses(tmp_path, smollm2_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    key = attention.model_key(hardware.detect(), inspect_file(smollm2_path), OPTIONS.threads)
    figures = {"q8_0+fa": {"0": 90.0, "1024": 30.0}, "f16+fa": {"0": 85.0, "1024": 20.0},
               "f16": {"0": 88.0, "1024": 60.0}}
    assert attention.Choices(settings.data_dir / "attention.json").remember(key, figures, "starter") == "f16"
    notes, reply = loaded_notes(settings, calibrate=False)
    assert reply
    [note] = [n for n in notes if n.startswith("attention:")]
    assert note.startswith("attention: f16 (") and "may differ" in note  # the cost of leaving exactness, said
    close = {"q8_0+fa": {"1024": 50.0}, "f16": {"1024": 55.0}}  # not enough faster to give exactness up
    assert attention.choose(close) == "q8_0+fa"
