"""Issue 17's GGUF findings, one test each: hostile headers are refused fast and with bounded memory,
and one bad file (or a FIFO) in a models folder never takes the library, `fireside ls`, `fireside info`
or `fireside import` down."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc
from contextlib import contextmanager
from pathlib import Path

import pytest

from fireside.engine.errors import InvalidModelFile, ModelNotFound
from fireside.engine.library import Library
from fireside.engine.models.inspection import inspect_file
from fireside.engine.settings import Settings
from tests.helpers.gguf_builder import I32, U32, U64, build_gguf, llama_kv, raw_gguf

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")


def fireside(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """The CLI as a user runs it, with its address space capped so a regression cannot exhaust the machine."""
    def cap() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, resource.RLIM_INFINITY))

    return subprocess.run([sys.executable, "-m", "fireside.engine", *args], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=cap if sys.platform == "linux" else None)


@contextmanager
def bounded(seconds: float, peak_bytes: int):
    """Assert the block takes under ``seconds`` and allocates under ``peak_bytes`` at its peak."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        yield
    finally:
        took = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert took < seconds, f"took {took:.2f} s"
    assert peak < peak_bytes, f"allocated {peak / 2**20:.0f} MiB at its peak"


def _file(tmp_path: Path, data: bytes, name: str = "bad.gguf") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_block_count_of_2_40_is_refused_at_once_without_allocating(tmp_path):
    path = _file(tmp_path, raw_gguf(llama_kv(2**40, U64)))
    assert path.stat().st_size < 1024  # the audit's file was 544 bytes
    with bounded(0.5, 8 << 20), pytest.raises(InvalidModelFile, match="block_count is 1,099,511,627,776"):
        inspect_file(path)


def test_block_count_of_2_24_is_refused_in_well_under_a_second(tmp_path):
    path = _file(tmp_path, raw_gguf(llama_kv(2**24, U32)))
    with bounded(0.5, 8 << 20), pytest.raises(InvalidModelFile, match="block_count"):
        inspect_file(path)


def test_fireside_info_on_a_2_24_block_count_answers_promptly(tmp_path):
    path = _file(tmp_path, raw_gguf(llama_kv(2**24, U32)))
    started = time.perf_counter()
    out = fireside("info", str(path), timeout=30)
    assert time.perf_counter() - started < 20
    assert out.returncode == 1 and "block_count" in out.stderr and "Traceback" not in out.stderr


def test_a_metadata_key_twice_is_refused(tmp_path):
    kv = llama_kv() + [("llama.context_length", U32, 999_999)]
    with pytest.raises(InvalidModelFile, match="llama.context_length' appears twice"):
        inspect_file(_file(tmp_path, raw_gguf(kv)))


def test_a_tensor_name_twice_is_refused(tmp_path):
    tensors = [("blk.0.attn_q.weight", (32,), 0), ("blk.0.attn_q.weight", (32,), 128)]
    with pytest.raises(InvalidModelFile, match="tensor 'blk.0.attn_q.weight' appears twice"):
        inspect_file(_file(tmp_path, raw_gguf(llama_kv(), tensors, data_bytes=256)))
    ok = [("blk.0.attn_q.weight", (32,), 0), ("blk.1.attn_q.weight", (32,), 128)]
    assert inspect_file(_file(tmp_path, raw_gguf(llama_kv(), ok, data_bytes=256))).layer_bytes == [128, 128]


@pytest.mark.parametrize("vtype,value,match", [
    (I32, 32, "value type 5, not the uint32"),
    (U64, 32, "value type 10, not the uint32"),
    (U32, 0, "not a power of two"),
    (U32, 48, "not a power of two"),
])
def test_alignment_must_be_a_uint32_power_of_two(tmp_path, vtype, value, match):
    kv = [("general.alignment", vtype, value)] + llama_kv()
    with pytest.raises(InvalidModelFile, match=match):
        inspect_file(_file(tmp_path, raw_gguf(kv)))


def test_a_tensor_off_the_alignment_is_refused(tmp_path):
    with pytest.raises(InvalidModelFile, match="not a multiple of the file's alignment"):
        inspect_file(_file(tmp_path, raw_gguf(llama_kv(), [("blk.0.attn_q.weight", (32,), 4)], data_bytes=256)))


@pytest.fixture
def settings(fireside_home):
    s = Settings.from_env()
    s.ensure_dirs()
    return s


def test_a_hostile_file_in_the_models_folder_is_reported_and_the_rest_still_work(settings):
    build_gguf(settings.models_dir / "pub/Good-GGUF/Good-Q8_0.gguf")
    _file(settings.models_dir, raw_gguf(llama_kv(2**40, U64)), "evil/Bomb-GGUF/Bomb-Q4_0.gguf")
    library = Library(settings)
    assert "pub/Good-GGUF/Good-Q8_0" in [m.id for m in library.list()]
    [broken] = library.broken()
    assert broken.path.name == "Bomb-Q4_0.gguf" and "block_count" in broken.reason
    with pytest.raises(ModelNotFound, match="cannot be used: .*block_count"):
        library.get("evil/Bomb-GGUF/Bomb-Q4_0")

    out = fireside("ls")
    assert out.returncode == 0, out.stderr
    assert "pub/Good-GGUF/Good-Q8_0" in out.stdout
    assert "not listed:" in out.stderr and "Bomb-Q4_0.gguf" in out.stderr and "block_count" in out.stderr


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


@needs_fifo
def test_a_fifo_in_the_models_folder_is_never_opened(settings):
    build_gguf(settings.models_dir / "pub/Good-GGUF/Good-Q8_0.gguf")
    _fifo(settings.models_dir / "evil/Pipe-GGUF/Pipe-Q4_0.gguf")
    out = fireside("ls", timeout=30)  # before the fix this blocked for ever in open()
    assert out.returncode == 0, out.stderr
    assert "pub/Good-GGUF/Good-Q8_0" in out.stdout
    assert "Pipe-Q4_0.gguf" in out.stderr and "named pipe" in out.stderr
    with pytest.raises(ModelNotFound, match="named pipe"):
        Library(settings).get("evil/Pipe-GGUF/Pipe-Q4_0")


@needs_fifo
def test_fireside_import_of_a_fifo_returns_promptly(settings, tmp_path):
    pipe = _fifo(tmp_path / "Downloads/Pipe-Q4_0.gguf")
    out = fireside("import", str(pipe), timeout=30)
    assert out.returncode == 1 and "named pipe" in out.stderr
    assert not any(settings.models_dir.rglob("*.gguf"))

    folder = tmp_path / "gpt4all"
    build_gguf(folder / "Good-Q4_0.gguf")
    _fifo(folder / "Pipe-Q4_0.gguf")
    out = fireside("import", "--from", "gpt4all", "--dir", str(folder), timeout=30)
    assert out.returncode == 0, out.stderr
    assert "imported gpt4all/Good-Q4_0 " in out.stdout


@needs_fifo
def test_inspecting_a_fifo_or_a_folder_is_refused_without_blocking(tmp_path):
    pipe = _fifo(tmp_path / "pipe.gguf")
    (tmp_path / "folder.gguf").mkdir()
    with bounded(1.0, 1 << 20):
        with pytest.raises(InvalidModelFile, match="named pipe"):
            inspect_file(pipe)
        with pytest.raises(InvalidModelFile, match="folder"):
            inspect_file(tmp_path / "folder.gguf")
