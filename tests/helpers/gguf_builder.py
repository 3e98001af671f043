"""Tiny but real GGUF files written with the ``gguf`` package, for library, hub and download tests.

``build_gguf(path)`` writes a small llama-shaped model: a real header (architecture, layer and head
counts, a vocabulary, a chat template) and real tensors whose bytes come from a seeded generator, so
two files with different seeds have different SHA-256 hashes. ``split_gguf`` writes the same model
as a split set named the way llama.cpp's ``gguf-split`` names one.

``raw_gguf`` writes a header byte by byte instead, for the files the ``gguf`` package refuses to write
(a key or a tensor name twice, an alignment of the wrong type, counts no real model has).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import gguf
import numpy as np


def build_gguf(path: Path, *, name: str = "Tiny", n_layers: int = 2, n_embd: int = 64,
               payload_bytes: int = 256 * 1024, seed: int = 0, template_chars: int = 0,
               tensors: tuple[int, int] = (0, 0)) -> Path:
    """Write a llama-shaped GGUF at ``path``; ``payload_bytes`` of extra F32 weights pad it out."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), arch="llama")
    _add_header(w, name, n_layers, n_embd, template_chars)
    lo, hi = tensors if tensors != (0, 0) else (0, n_layers)
    for i in range(lo, hi):
        w.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((n_embd, n_embd), dtype=np.float32))
    if lo == 0:
        w.add_tensor("token_embd.weight", rng.standard_normal((32, n_embd), dtype=np.float32))
        extra = max(1, payload_bytes // 4 // n_embd)
        w.add_tensor("output_norm.extra", rng.standard_normal((extra, n_embd), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def _add_header(w: gguf.GGUFWriter, name: str, n_layers: int, n_embd: int, template_chars: int) -> None:
    w.add_name(name)
    w.add_block_count(n_layers)
    w.add_context_length(2048)
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(n_embd * 4)
    w.add_head_count(4)
    w.add_head_count_kv(4)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}" for i in range(32)])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    w.add_chat_template(template + " " * max(0, template_chars - len(template)))


def split_gguf(folder: Path, stem: str, count: int = 2, **kw) -> list[Path]:
    """A split set ``STEM-0000N-of-0000C.gguf``: the first part holds the metadata and the first
    layers, the others the rest (with the split keys ``gguf-split`` writes)."""
    n_layers = kw.pop("n_layers", count)
    paths = []
    per = max(1, n_layers // count)
    for i in range(count):
        path = Path(folder) / f"{stem}-{i + 1:05d}-of-{count:05d}.gguf"
        lo, hi = i * per, n_layers if i == count - 1 else (i + 1) * per
        if i == 0:
            build_gguf(path, n_layers=n_layers, tensors=(0, hi) if hi else (0, 0), **kw)
        else:
            _write_part(path, i, count, lo, hi, kw.get("n_embd", 64), kw.get("seed", 0))
        paths.append(path)
    return paths


def _write_part(path: Path, index: int, count: int, lo: int, hi: int, n_embd: int, seed: int) -> None:
    rng = np.random.default_rng(seed + index)
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_uint16("split.no", index)
    w.add_uint16("split.count", count)
    for i in range(lo, hi):
        w.add_tensor(f"blk.{i}.attn_q.weight", rng.standard_normal((n_embd, n_embd), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def sha256_of(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
STRING, ARRAY, U32, I32, U64, F32 = 8, 9, 4, 5, 10, 6  # GGUF value types


def _gguf_value(vtype: int, value: object) -> bytes:
    if vtype == STRING:
        raw = str(value).encode()
        return struct.pack("<Q", len(raw)) + raw
    if vtype == ARRAY:
        item_type, items = value
        return struct.pack("<IQ", item_type, len(items)) + b"".join(_gguf_value(item_type, v) for v in items)
    return struct.pack(_FORMATS[vtype], value)


def raw_gguf(kv: list[tuple[str, int, object]], tensors: list[tuple[str, tuple[int, ...], int]] = (),
             data_bytes: int = 0) -> bytes:
    """A GGUF v3 file from ``(key, value type, value)`` entries and ``(name, shape, offset)`` F32
    tensors, written as given (no checks), then padded to 32 bytes and ``data_bytes`` of zeros."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, vtype, value in kv:
        out += _gguf_value(STRING, key) + struct.pack("<I", vtype) + _gguf_value(vtype, value)
    for name, shape, offset in tensors:
        out += _gguf_value(STRING, name) + struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<IQ", 0, offset)
    return out + b"\0" * ((-len(out)) % 32) + b"\0" * data_bytes


def llama_kv(block_count: int = 2, block_type: int = U32) -> list[tuple[str, int, object]]:
    """The metadata of a small llama, with ``block_count`` written as ``block_type``."""
    return [("general.architecture", STRING, "llama"), ("llama.block_count", block_type, block_count),
            ("llama.context_length", U32, 2048), ("llama.embedding_length", U32, 64),
            ("llama.attention.head_count", U32, 4)]
