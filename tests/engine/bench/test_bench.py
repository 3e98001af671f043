"""``fireside bench`` against fake servers of known timing, and once against the real engine."""

from __future__ import annotations

import json
import struct

import pytest

from fireside.engine.bench import BenchConfig, run_sweep
from fireside.engine.bench.sweep import BenchError
from fireside.engine.bench.targets import HttpTarget
from fireside.engine.bench.workload import make_prompts
from fireside.engine.cli import main
from tests.helpers.fakeopenai import Behaviour, start_fake_server

OUT = 20


@pytest.fixture
def fake():
    servers = []

    def start(**behaviour):
        server = start_fake_server(Behaviour(**behaviour))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def sweep(url: str, levels=(1,), n: int = 4, endpoint: str = "completions"):
    target = HttpTarget(url, "fake-model", endpoint=endpoint, timeout_s=10)
    try:
        return run_sweep(target, BenchConfig(list(levels), n, 16, OUT, seed=1, warmup=1), model="fake-model")
    finally:
        target.close()


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_a_token_every_10_ms_measures_10_ms_per_token(fake, endpoint):
    report = sweep(fake().url, levels=(1, 4), endpoint=endpoint)
    one, four = report.levels
    for level in (one, four):
        assert level.ok == 4 and level.failed == 0
        assert level.completion_tokens == 4 * OUT and level.length.asked == 4 * OUT
        assert level.notes == []
        assert 8.0 <= level.tpot_ms.p50 <= 16.0, level.tpot_ms  # 10 ms, with room for a busy 2-core machine
        assert 8.0 <= level.itl_ms.p50 <= 16.0, level.itl_ms
        assert level.ttft_ms.p50 >= 19.0  # the fake waits 20 ms before its first token
    assert 1 / 0.23 * OUT * 0.6 <= one.output_tokens_per_s <= 1 / 0.21 * OUT * 1.05
    assert four.output_tokens_per_s > 2.5 * one.output_tokens_per_s  # four streams at once


def test_server_that_ignores_max_tokens_is_flagged(fake):
    level = sweep(fake(ignore_max_tokens=True).url, n=2).levels[0]
    assert level.completion_tokens == 2 * 2 * OUT and level.length.longer == 2
    assert any("ignored max_tokens" in note for note in level.notes)


def test_reply_that_ends_early_is_flagged(fake):
    level = sweep(fake(stop_after=5).url, n=2).levels[0]
    assert level.completion_tokens == 10 and level.length.shorter == 2
    assert any("did not honour ignore_eos" in note for note in level.notes)


def test_server_refusing_ignore_eos_is_benchmarked_without_it(fake):
    report = sweep(fake(refuse_extensions=True).url, n=2)
    assert report.levels[0].ok == 2 and report.levels[0].completion_tokens == 2 * OUT
    assert any("refused ignore_eos" in note for note in report.notes)


def test_stream_without_usage_counts_events_and_says_so(fake):
    level = sweep(fake(send_usage=False).url, n=2).levels[0]
    assert level.completion_tokens == 2 * OUT
    assert any("without usage" in note for note in level.notes)


def test_unreachable_server_is_a_clear_error(fake):
    server = fake()
    url = server.url
    server.stop()
    with pytest.raises(BenchError, match="warm-up request .* failed: ConnectError"):
        sweep(url)


def test_prompts_follow_the_seed():
    a, b = make_prompts(3, 50, seed=7), make_prompts(3, 50, seed=7)
    assert a == b and len(set(a)) == 3 and all(len(p.split()) == 50 for p in a)
    assert make_prompts(3, 50, seed=8) != a


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_cli_prints_table_and_writes_json_and_plot(fake, tmp_path, capsys):
    url = fake().url
    out_json, out_png = tmp_path / "r" / "bench.json", tmp_path / "r" / "bench.png"
    code = main(["bench", "--base-url", url, "--concurrency", "1,2", "--num-prompts", "3", "--output-len", "6",
                 "--input-len", "8", "--json", str(out_json), "--plot", str(out_png)])
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert "model fake-model" in lines[0]  # the first model /v1/models lists
    rows = [line.split() for line in lines if line[:1].isdigit()]
    assert [r[:4] for r in rows] == [["1", "3", "0", "18/18"], ["2", "3", "0", "18/18"]]
    data = json.loads(out_json.read_text())
    assert [lv["concurrency"] for lv in data["levels"]] == [1, 2]
    assert data["levels"][0]["tpot_ms"]["p99"] > 0 and data["config"]["output_len"] == 6
    png = out_png.read_bytes()
    assert _png_size(png) == (1100, 462) and len(png) > 20_000


def test_cli_against_a_dead_server_says_so(capsys):
    code = main(["bench", "--base-url", "http://127.0.0.1:9", "--concurrency", "1", "--num-prompts", "1"])
    assert code == 1
    assert "could not list the models of http://127.0.0.1:9" in capsys.readouterr().err


@pytest.mark.model
def test_local_engine_bench(smollm2_path, capsys):
    code = main(["bench", "--local", "starter", "--concurrency", "1,2", "--num-prompts", "2", "--input-len", "16",
                 "--output-len", "4", "--ctx", "512"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("local runtime: starter")
    rows = [line.split() for line in out.splitlines() if line[:1].isdigit()]
    assert [r[:3] for r in rows] == [["1", "2", "0"], ["2", "2", "0"]]
    given = [int(r[3].split("/")[0]) for r in rows]
    assert all(0 < g <= 8 for g in given)  # at most the 2 x 4 asked; fewer only if the model ended early
