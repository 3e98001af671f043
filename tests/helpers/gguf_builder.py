"""Every GGUF file the tests use, written here with the ``gguf`` package (the one GGUF writer of the suite).

``build_gguf(path)`` writes a small llama-shaped model: a real header (architecture, layer and head
counts, a vocabulary, a chat template) and real tensors whose bytes come from a seeded generator, so
two files with different seeds have different SHA-256 hashes. ``split_gguf`` writes the same model
as a split set named the way llama.cpp's ``gguf-split`` names one.

``write_model(path, shape)`` writes a model-shaped file for inspection and fit-planner tests: a real
llama-style header (per-layer attention and FFN tensors with real shapes and quantization types),
then the file made its full length as a *sparse* file, so an "8B" model costs a few kilobytes of disk
yet has every tensor inside the file, exactly as a downloaded one does.

``raw_gguf`` writes a header byte by byte instead, for the files the ``gguf`` package refuses to write
(a key or a tensor name twice, an alignment of the wrong type, counts no real model has).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter, LlamaFileType

Q = GGMLQuantizationType


@dataclass(frozen=True)
class Shape:
    n_layers: int
    n_embd: int
    n_head: int
    n_kv_head: int
    n_ff: int
    n_vocab: int
    n_ctx: int
    n_expert: int = 0  # a MoE model's experts per layer (Mixtral's shape), each n_ff wide
    n_expert_used: int = 0


LLAMA_8B = Shape(n_layers=36, n_embd=4096, n_head=32, n_kv_head=8, n_ff=12288, n_vocab=151936, n_ctx=131072)  # Qwen3-8B-like
LLAMA_70B = Shape(n_layers=80, n_embd=8192, n_head=64, n_kv_head=8, n_ff=28672, n_vocab=128256, n_ctx=131072)
MIXTRAL_8X7B = Shape(n_layers=32, n_embd=4096, n_head=32, n_kv_head=8, n_ff=14336, n_vocab=32000, n_ctx=32768,
                     n_expert=8, n_expert_used=2)
TINY = Shape(n_layers=4, n_embd=64, n_head=4, n_kv_head=2, n_ff=128, n_vocab=64, n_ctx=2048)


def build_gguf(path: Path, *, name: str = "Tiny", n_layers: int = 2, n_embd: int = 64,
               payload_bytes: int = 256 * 1024, seed: int = 0, template_chars: int = 0,
               tensors: tuple[int, int] = (0, 0)) -> Path:
    """Write a llama-shaped GGUF at ``path``; ``payload_bytes`` of extra F32 weights pad it out."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = GGUFWriter(str(path), arch="llama")
    template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    _add_header(w, name, Shape(n_layers, n_embd, 4, 4, n_embd * 4, 32, 2048), LlamaFileType.ALL_F32,
                template + " " * max(0, template_chars - len(template)), tokens=("llama", "tok{}"))
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


def _add_header(w: GGUFWriter, name: str, s: Shape, file_type: LlamaFileType, chat_template: str | None,
                tokens: tuple[str, str] | None = ("gpt2", "<t{}>"), sliding_window: int | None = None) -> None:
    """A llama header: ``tokens`` is (tokenizer model, token name pattern), None for no vocabulary."""
    w.add_name(name)
    w.add_block_count(s.n_layers)
    w.add_context_length(s.n_ctx)
    w.add_embedding_length(s.n_embd)
    w.add_feed_forward_length(s.n_ff)
    w.add_head_count(s.n_head)
    w.add_head_count_kv(s.n_kv_head)
    if s.n_expert:
        w.add_expert_count(s.n_expert)
        w.add_expert_used_count(s.n_expert_used)
    w.add_file_type(file_type)
    if sliding_window:
        w.add_sliding_window(sliding_window)
    if tokens:
        model, pattern = tokens
        w.add_tokenizer_model(model)
        w.add_token_list([pattern.format(i) for i in range(s.n_vocab)])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    if chat_template:
        w.add_chat_template(chat_template)


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


def _nbytes(shape: tuple[int, ...], qtype: GGMLQuantizationType) -> int:
    block, size = GGML_QUANT_SIZES[qtype]
    n = int(np.prod(shape))
    return n // block * size


def _tensors(s: Shape, weight: GGMLQuantizationType, output: GGMLQuantizationType) -> list[tuple[str, tuple[int, ...], GGMLQuantizationType]]:
    head_dim = s.n_embd // s.n_head
    kv = s.n_kv_head * head_dim
    out = [("token_embd.weight", (s.n_vocab, s.n_embd), weight)]
    for i in range(s.n_layers):
        b = f"blk.{i}."
        out += [
            (b + "attn_norm.weight", (s.n_embd,), Q.F32),
            (b + "attn_q.weight", (s.n_embd, s.n_embd), weight),
            (b + "attn_k.weight", (kv, s.n_embd), weight),
            (b + "attn_v.weight", (kv, s.n_embd), weight),
            (b + "attn_output.weight", (s.n_embd, s.n_embd), weight),
            (b + "ffn_norm.weight", (s.n_embd,), Q.F32),
        ]
        if s.n_expert:  # the router, then every expert of the layer in one tensor each
            out += [(b + "ffn_gate_inp.weight", (s.n_expert, s.n_embd), Q.F32),
                    (b + "ffn_gate_exps.weight", (s.n_expert, s.n_ff, s.n_embd), weight),
                    (b + "ffn_up_exps.weight", (s.n_expert, s.n_ff, s.n_embd), weight),
                    (b + "ffn_down_exps.weight", (s.n_expert, s.n_embd, s.n_ff), weight)]
        else:
            out += [(b + "ffn_gate.weight", (s.n_ff, s.n_embd), weight),
                    (b + "ffn_up.weight", (s.n_ff, s.n_embd), weight),
                    (b + "ffn_down.weight", (s.n_embd, s.n_ff), weight)]
    out += [("output_norm.weight", (s.n_embd,), Q.F32), ("output.weight", (s.n_vocab, s.n_embd), output)]
    return out


def write_model(path: Path, shape: Shape = TINY, *, weight: GGMLQuantizationType = Q.Q8_0,
                output: GGMLQuantizationType = Q.Q8_0, file_type: LlamaFileType = LlamaFileType.MOSTLY_Q8_0,
                chat_template: str | None = None, name: str = "Test model", sliding_window: int | None = None,
                vocab_tokens: bool = True) -> Path:
    """Write a llama-shaped GGUF of ``shape`` at ``path`` as a full-length sparse file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w = GGUFWriter(str(path), arch="llama")
    _add_header(w, name, shape, file_type, chat_template, ("gpt2", "<t{}>") if vocab_tokens else None, sliding_window)
    total = 0
    for name_, shp, qtype in _tensors(shape, weight, output):
        nbytes = _nbytes(shp, qtype)
        w.add_tensor_info(name_, shp, np.dtype(np.float32), nbytes, raw_dtype=qtype)
        total += GGUFWriter.ggml_pad(nbytes, w.data_alignment)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    header_end = fout.tell()
    w.close()
    data_offset = GGUFWriter.ggml_pad(header_end, 32)
    with path.open("r+b") as fh:
        fh.truncate(data_offset + total)  # sparse: the tensor data reads as zeros and takes no disk
    return path
