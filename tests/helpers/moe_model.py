"""A tiny mixture-of-experts model for the tests: llama's architecture with ``expert_count`` experts in each
layer's feed-forward (Mixtral's shape: a router ``ffn_gate_inp`` and the experts' ``ffn_gate_exps``,
``ffn_up_exps``, ``ffn_down_exps``, each one tensor holding every expert), which the vendored llama.cpp
loads as a MoE model. Seeded random weights, SmolLM2's vocabulary and chat template (borrowed from the
starter GGUF, as ``vision_model.py`` does), 64 wide: a few MB, a reply in milliseconds. Its products keep
their input's size (weights of 1/sqrt(width)), so a reply does not hang on near-ties that another backend's
rounding flips: on llvmpipe its greedy reply is the CPU's, where weights twice that size parted at the first
token (Vulkan rounds a prompt's batched products differently). The experts are
most of its layers' bytes, as in a real MoE model, so keeping them in host memory is what lets its
layers fit on a small device.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGUFWriter

from tests.helpers.vision_model import N_EMBD, _copy_tokenizer, _finish, _tokenizer_keys

N_EXPERT = 4
N_EXPERT_USED = 2
N_FF = 256  # each expert's feed-forward width


def write_moe_model(path: Path, tokenizer_from: Path, *, seed: int = 5, n_layers: int = 4) -> Path:
    rng = np.random.default_rng(seed)
    keys = _tokenizer_keys(tokenizer_from)
    n_vocab, n_head = len(keys["tokenizer.ggml.tokens"]), 4

    def t(*shape: int, scale: float = 0.125) -> np.ndarray:  # 1/sqrt(64): each product keeps its input's size
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    w = GGUFWriter(str(path), arch="llama")
    w.add_name("Tiny MoE")
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(N_EMBD // n_head)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_EXPERT_USED)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    _copy_tokenizer(w, keys)
    w.add_tensor("token_embd.weight", t(n_vocab, N_EMBD, scale=1.0))  # also the output (tied)
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for i in range(n_layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", t(N_EMBD, N_EMBD))
        # numpy's shape is ggml's reversed: ggml's {n_embd, n_expert} router, {n_embd, n_ff, n_expert} experts
        w.add_tensor(f"blk.{i}.ffn_gate_inp.weight", t(N_EXPERT, N_EMBD, scale=1.0).astype(np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate_exps.weight", t(N_EXPERT, N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up_exps.weight", t(N_EXPERT, N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down_exps.weight", t(N_EXPERT, N_EMBD, N_FF))
    _finish(w)
    return path
