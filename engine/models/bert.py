"""BERT encoders in GGUF, written with the ``gguf`` package the way llama.cpp's ``BertModel`` converter writes
them, and a NumPy forward pass to check llama.cpp against.

``write_bert(out, config, tokens, weights, pooling)`` converts a BERT in Hugging Face's tensor names (as
sentence-transformers ships it): the WordPiece vocabulary in its "phantom space" spelling, non-causal
attention, the pooling named in the header; matrices as f16, norms and biases as f32. ``vocabulary`` reads
the tokens from a ``tokenizer.json``. ``embed(weights, config, ids, pooling)`` is the oracle: a plain NumPy
forward pass in float64, pooled by the mean or by the first ([CLS]) token, normalized. The built-in
embedder (``library/minilm.py``) is converted with them at first use; ``bench/embedder_gguf.py`` and the
tests use them too.
"""

from __future__ import annotations

from math import erf, sqrt
from pathlib import Path

import gguf
import numpy as np

MEAN, CLS = gguf.PoolingType.MEAN, gguf.PoolingType.CLS
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def phantom(token: str, kind: int) -> str:
    """llama.cpp's WordPiece spelling: continuations lose ``##``, word starts gain U+2581."""
    if kind == gguf.TokenType.CONTROL:
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


def vocabulary(tokenizer: dict) -> list[tuple[str, int]]:
    """(token, gguf.TokenType) by id from a ``tokenizer.json``: special tokens are control tokens, [UNK]
    the unknown one."""
    by_id = {i: tok for tok, i in tokenizer["model"]["vocab"].items()}
    special = {t["id"] for t in tokenizer.get("added_tokens", []) if t.get("special")}
    unk = tokenizer["model"].get("unk_token", "[UNK]")
    return [(by_id[i], gguf.TokenType.UNKNOWN if by_id[i] == unk else
             gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL) for i in range(max(by_id) + 1)]


def write_bert(out: Path, config: dict, tokens: list[tuple[str, int]], weights: dict[str, np.ndarray],
               pooling: int, name: str = "bert", special: dict[str, int] | None = None,
               matrices: gguf.GGMLQuantizationType = gguf.GGMLQuantizationType.F16) -> Path:
    """A GGUF of a BERT: ``tokens`` as (WordPiece token, gguf.TokenType) by id, ``weights`` by HF name;
    ``matrices`` the type of the layers' matrices (F16, or Q8_0: about 2x faster on CPUs, cosine > 0.999)."""
    blocks = config["num_hidden_layers"]
    writer = gguf.GGUFWriter(str(out), "bert")
    writer.add_name(name)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_block_count(blocks)
    writer.add_head_count(config["num_attention_heads"])
    writer.add_layer_norm_eps(config["layer_norm_eps"])
    writer.add_causal_attention(False)
    writer.add_pooling_type(pooling)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if matrices == gguf.GGMLQuantizationType.Q8_0
                         else gguf.LlamaFileType.MOSTLY_F16)
    writer.add_token_type_count(config.get("type_vocab_size", 2))
    writer.add_tokenizer_model("bert")
    writer.add_token_list([phantom(tok, kind) for tok, kind in tokens])
    writer.add_token_types([kind for _, kind in tokens])
    ids = special or {t: i for i, (t, _) in enumerate(tokens) if t in SPECIAL}
    writer.add_bos_token_id(ids["[CLS]"])
    writer.add_eos_token_id(ids["[SEP]"])
    writer.add_unk_token_id(ids["[UNK]"])
    writer.add_sep_token_id(ids["[SEP]"])
    writer.add_pad_token_id(ids["[PAD]"])
    writer.add_mask_token_id(ids["[MASK]"])
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)
    _add_tensors(writer, weights, blocks, matrices)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def _add_tensors(writer: gguf.GGUFWriter, weights: dict[str, np.ndarray], blocks: int,
                 matrices: gguf.GGMLQuantizationType) -> None:
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)
    for hf_name, data in weights.items():
        if hf_name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"no GGUF name for tensor {hf_name}")
        wide = data.ndim == 2 and not new.startswith("token_types")
        if wide and new.startswith("blk.") and matrices != gguf.GGMLQuantizationType.F16:
            writer.add_tensor(new, gguf.quants.quantize(np.asarray(data, dtype=np.float32), matrices),
                              raw_dtype=matrices)
        else:
            writer.add_tensor(new, np.ascontiguousarray(data, dtype=np.float16 if wide else np.float32))


def embed(weights: dict[str, np.ndarray], config: dict, ids: list[int], pooling: int) -> np.ndarray:
    """The oracle: BERT's forward pass over ``ids`` in float64, pooled and normalized."""
    w = weights
    heads, eps, n = config["num_attention_heads"], config["layer_norm_eps"], len(ids)

    def norm(x, prefix):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * w[prefix + ".weight"] + w[prefix + ".bias"]

    def dense(x, prefix):
        return x @ w[prefix + ".weight"].astype(np.float64).T + w[prefix + ".bias"]

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / sqrt(2))))
    x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
         + w["embeddings.token_type_embeddings.weight"][0]).astype(np.float64)
    x = norm(x, "embeddings.LayerNorm")
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (dense(x, p + f"attention.self.{m}").reshape(n, heads, -1).transpose(1, 0, 2)
                   for m in ("query", "key", "value"))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        attn = (scores / scores.sum(-1, keepdims=True)) @ v
        x = norm(x + dense(attn.transpose(1, 0, 2).reshape(n, -1), p + "attention.output.dense"),
                 p + "attention.output.LayerNorm")
        x = norm(x + dense(gelu(dense(x, p + "intermediate.dense")), p + "output.dense"), p + "output.LayerNorm")
    pooled = x[0] if pooling == CLS else x.mean(0)
    return pooled / np.linalg.norm(pooled)
