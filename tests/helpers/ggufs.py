"""Model-shaped GGUF files written by the ``gguf`` package, for inspection and fit-planner tests.

``write_model`` lays out a real llama-style header (per-layer attention and FFN tensors with real
shapes and quantization types) and then makes the file its full length as a *sparse* file, so an
"8B" model costs a few kilobytes of disk yet has every tensor inside the file, exactly as a
downloaded one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


LLAMA_8B = Shape(n_layers=36, n_embd=4096, n_head=32, n_kv_head=8, n_ff=12288, n_vocab=151936, n_ctx=131072)  # Qwen3-8B-like
LLAMA_70B = Shape(n_layers=80, n_embd=8192, n_head=64, n_kv_head=8, n_ff=28672, n_vocab=128256, n_ctx=131072)
TINY = Shape(n_layers=4, n_embd=64, n_head=4, n_kv_head=2, n_ff=128, n_vocab=64, n_ctx=2048)


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
            (b + "ffn_gate.weight", (s.n_ff, s.n_embd), weight),
            (b + "ffn_up.weight", (s.n_ff, s.n_embd), weight),
            (b + "ffn_down.weight", (s.n_embd, s.n_ff), weight),
        ]
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
    w.add_name(name)
    w.add_block_count(shape.n_layers)
    w.add_context_length(shape.n_ctx)
    w.add_embedding_length(shape.n_embd)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_kv_head)
    w.add_file_type(file_type)
    if sliding_window:
        w.add_sliding_window(sliding_window)
    if vocab_tokens:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"<t{i}>" for i in range(shape.n_vocab)])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
    if chat_template:
        w.add_chat_template(chat_template)
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
