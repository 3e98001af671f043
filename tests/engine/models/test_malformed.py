"""A corpus of malformed and hostile GGUF files: each is refused with a clear error, fast, never a crash."""

from __future__ import annotations

import struct
import time

import pytest

from fireside.engine.errors import InvalidModelFile
from fireside.engine.models.inspection import inspect_file
from tests.helpers.gguf_builder import TINY, write_model


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    return write_model(tmp_path_factory.mktemp("good") / "tiny.gguf", TINY, chat_template="{{ x }}").read_bytes()


def _refused(tmp_path, data: bytes, match: str) -> str:
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    started = time.perf_counter()
    with pytest.raises(InvalidModelFile, match=match) as err:
        inspect_file(path)
    assert time.perf_counter() - started < 1.0
    return str(err.value)


def test_truncated_at_many_offsets(tmp_path, good):
    info_end = len(good) - 1
    offsets = sorted({0, 1, 3, 4, 7, 8, 15, 23, 24, 40, 100, 1000, 5000, len(good) // 2, info_end})
    for cut in offsets:
        message = _refused(tmp_path, good[:cut], "truncated|file ends|not a GGUF|past the end")
        assert "bad.gguf" in message


def test_bad_magic(tmp_path, good):
    _refused(tmp_path, b"GGML" + good[4:], "not a GGUF file")


def test_unsupported_version(tmp_path, good):
    _refused(tmp_path, good[:4] + struct.pack("<I", 1) + good[8:], "version 1")
    _refused(tmp_path, good[:4] + struct.pack("<I", 99) + good[8:], "version 99")


def test_huge_counts(tmp_path, good):
    _refused(tmp_path, good[:8] + struct.pack("<Q", 2**62) + good[16:], "tensors")
    _refused(tmp_path, good[:16] + struct.pack("<Q", 2**40) + good[24:], "metadata entries")


def _first_key_offset(good: bytes) -> int:
    return 24  # magic, version, tensor count, kv count


def test_huge_string_length(tmp_path, good):
    at = _first_key_offset(good)
    _refused(tmp_path, good[:at] + struct.pack("<Q", 2**60) + good[at + 8:], "cap")


def test_huge_array_length(tmp_path):
    data = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, 1))
    key = b"tokenizer.ggml.tokens"
    data += struct.pack("<Q", len(key)) + key + struct.pack("<I", 9) + struct.pack("<IQ", 8, 2**50)
    _refused(tmp_path, bytes(data), "cap")


def test_tensor_extent_past_end_of_file(tmp_path, good):
    _refused(tmp_path, good[: len(good) - 64], "past the end")


def _tensor_header(n_dims: int, dims: list[int], type_id: int = 0, offset: int = 0) -> bytes:
    arch = b"general.architecture"
    data = b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
    data += struct.pack("<Q", len(arch)) + arch + struct.pack("<I", 8) + struct.pack("<Q", 5) + b"llama"
    name = b"t"
    data += struct.pack("<Q", len(name)) + name + struct.pack("<I", n_dims)
    data += b"".join(struct.pack("<Q", d) for d in dims)
    data += struct.pack("<IQ", type_id, offset)
    return data + b"\0" * 64


def test_too_many_dimensions(tmp_path):
    _refused(tmp_path, _tensor_header(5, [1, 1, 1, 1, 1]), "dimensions")
    _refused(tmp_path, _tensor_header(2**31, []), "dimensions")


def test_absurd_dimension_sizes_and_types(tmp_path):
    _refused(tmp_path, _tensor_header(2, [2**40, 2**40]), "elements|impossible")
    _refused(tmp_path, _tensor_header(1, [0]), "impossible dimension")
    _refused(tmp_path, _tensor_header(1, [32], type_id=999), "unknown type")
    _refused(tmp_path, _tensor_header(1, [32], offset=2**60), "past the end")


def test_unknown_value_type_and_nested_arrays(tmp_path):
    base = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k"
    _refused(tmp_path, base + struct.pack("<I", 77), "unknown value type")
    _refused(tmp_path, base + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1), "nests arrays")


def test_random_byte_flips_never_crash(tmp_path, good):
    import random

    rng = random.Random(7)
    for _ in range(200):
        data = bytearray(good)
        for _ in range(4):
            data[rng.randrange(0, min(len(data), 4096))] = rng.randrange(256)
        path = tmp_path / "flip.gguf"
        path.write_bytes(bytes(data))
        try:
            inspect_file(path)
        except InvalidModelFile:
            pass
