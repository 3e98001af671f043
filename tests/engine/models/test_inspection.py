"""GGUF inspection on files the gguf package writes, and on the real SmolLM2 starter model."""

from __future__ import annotations

import pytest

from fireside.engine.errors import HeaderIncomplete
from fireside.engine.models.inspection import inspect_file, inspect_header
from tests.helpers.gguf_builder import LLAMA_8B, TINY, Q, write_model


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("m") / "llama8b.Q4_K_M.gguf", LLAMA_8B, weight=Q.Q4_K, output=Q.Q6_K)


def test_8b_like_header_needs_144_kib_of_f16_kv_cache_per_token(llama8b):
    info = inspect_file(llama8b)
    assert (info.block_count, info.head_count_kv[0], info.key_length) == (36, 8, 128)
    assert info.kv_bytes_per_token("f16") == 144 * 1024
    # q8_0 packs 32 values in 34 bytes, q4_0 in 18
    assert info.kv_bytes_per_token("q8_0") == 144 * 1024 * 34 // 32 // 2
    assert info.kv_bytes_per_token("q4_0") == 144 * 1024 * 18 // 32 // 2


def test_8b_like_file_reports_its_shape_and_quantization_mix(llama8b):
    info = inspect_file(llama8b)
    assert info.architecture == "llama"
    assert info.context_length == 131072
    assert info.vocab_size == 151936
    assert 7.5e9 < info.parameter_count < 8.5e9
    assert set(info.quant_mix) == {"Q4_K", "Q6_K", "F32"}
    assert len(info.layer_bytes) == 36 and len(set(info.layer_bytes)) == 1
    assert info.weights_bytes <= info.file_size
    assert info.bos_token == "<t1>" and info.eos_token == "<t2>"


def test_header_alone_is_enough_and_asks_for_more_when_cut_short(llama8b):
    with llama8b.open("rb") as fh:
        data = fh.read(8 * 1024 * 1024)
    info = inspect_header(data, name=llama8b.name, file_size=llama8b.stat().st_size)
    assert info.kv_bytes_per_token() == 144 * 1024
    with pytest.raises(HeaderIncomplete) as err:
        inspect_header(data[:100_000])
    assert err.value.needed > 100_000


def test_sliding_window_and_chat_template_are_read(tmp_path):
    path = write_model(tmp_path / "swa.gguf", TINY, sliding_window=512, chat_template="{{ messages }}")
    info = inspect_file(path)
    assert info.sliding_window == 512
    assert info.chat_template == "{{ messages }}"


def test_split_set_counts_as_one_model(tmp_path):
    from tests.helpers.gguf_builder import split_gguf

    parts = split_gguf(tmp_path, "tiny", count=3, n_layers=3)
    info = inspect_file(parts[0])
    assert info.split_files == [str(p) for p in parts]
    assert info.file_size == sum(p.stat().st_size for p in parts)
    assert all(b > 0 for b in info.layer_bytes)


def test_real_smollm2(smollm2_path):
    info = inspect_file(smollm2_path)
    assert info.architecture == "llama"
    assert info.block_count == 30
    assert info.file_type == "Q4_1"
    assert info.context_length == 8192
    assert (info.head_count, info.head_count_kv[0], info.key_length) == (9, 3, 64)
    assert info.kv_bytes_per_token("f16") == 30 * 3 * 64 * 2 * 2
    assert info.tied_embeddings
    assert "im_start" in (info.chat_template or "")
