"""`fireside hw` and `fireside info` as a user runs them: real subprocesses, real output."""

from __future__ import annotations

import json
import re

from tests.helpers.cli import fireside


def test_hw_lists_backends_devices_and_memory():
    out = fireside("hw")
    assert out.returncode == 0, out.stderr
    # CPU among the backends (a build with -DGGML_RPC=on, as the README's install asks, lists "RPC, CPU")
    assert re.search(r"backends: [^\n]*\bCPU\b", out.stdout), out.stdout
    assert "RAM:" in out.stdout and "cores" in out.stdout
    data = json.loads(fireside("hw", "--json").stdout)
    assert any(d["kind"] == "cpu" for d in data["devices"])
    assert data["ram_total_bytes"] > 0 and data["cpu_cores"] >= 1


def test_info_on_the_starter_model_prints_what_it_is_and_a_verdict():
    out = fireside("info", "starter")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "architecture     llama" in text
    assert "layers           30" in text
    assert "Q4_1" in text
    assert "trained context  8,192 tokens" in text
    assert "KV cache/token   23 KB (f16)" in text  # 22.5 KiB: 23,040 bytes, in the decimal units of engine/fmt.py
    assert "Fit on this machine: runs on the CPU" in text


def test_info_json_for_scripts():
    data = json.loads(fireside("info", "starter", "--json", "--ctx", "2048").stdout)
    assert data["model"]["block_count"] == 30
    assert data["model"]["kv_bytes_per_token"]["f16"] == 23040
    assert data["plan"]["verdict"] == "cpu_only" and data["plan"]["context"] == 2048


def test_info_on_a_broken_file_is_a_clear_error_not_a_traceback(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 16)
    out = fireside("info", str(bad))
    assert out.returncode == 1
    assert out.stderr.startswith("fireside: broken.gguf:")
    assert "Traceback" not in out.stderr


def test_info_shows_the_parallel_slots_and_parallel_sets_them():
    assert "4 parallel slots, each with its own context" in fireside("info", "starter").stdout
    data = json.loads(fireside("info", "starter", "--json", "--ctx", "2048", "--parallel", "2").stdout)
    assert data["plan"]["parallel"] == 2
    assert data["plan"]["ram"]["kv_bytes"] == 2 * 2048 * 23040 * 17 // 32  # a q8_0 KV cache (auto, exact) per slot


def test_info_and_hw_show_the_long_chat_lane_and_count_its_cache(tmp_path, smollm2_path):
    import os

    from fireside.engine.models import hardware
    from fireside.engine.models.inspection import inspect_file
    from fireside.engine.runtime import attention
    from fireside.engine.settings import Settings

    env = {**os.environ, "FIRESIDE_HOME": str(tmp_path)}
    plain = fireside("info", "starter", "--ctx", "2048", "--threads", "2", env=env).stdout
    assert "attention: not measured on this machine yet" in plain
    key = attention.model_key(hardware.detect(), inspect_file(smollm2_path), 2)
    figures = {"q8_0+fa": {"0": 90.0, "1024": 30.0}, "f16": {"0": 88.0, "1024": 60.0}}
    attention.Choices(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}).data_dir / "attention.json").remember(
        key, figures, "starter")
    laned = fireside("info", "starter", "--ctx", "2048", "--threads", "2", env=env).stdout
    assert "attention: q8_0+fa for greedy and seeded replies, f16 for sampled ones from 256 tokens" in laned
    kv = [re.search(r"KV ([\d.]+) MB", text) for text in (plain, laned)]
    assert float(kv[1].group(1)) > 2 * float(kv[0].group(1))  # the lane's f16 cache beside the q8_0 one
    by_hand = fireside("info", "starter", "--ctx", "2048", "--threads", "2", "--kv-type", "f16", env=env).stdout
    assert "attention: as this load asks (measured on this machine: decode tok/s" in by_hand
    assert "for sampled ones" in fireside("hw", env=env).stdout
