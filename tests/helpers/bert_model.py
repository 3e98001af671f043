"""BERT embedders in GGUF, written with the ``gguf`` package, and a NumPy oracle to check llama.cpp against.

``write_bert(out, config, tokens, weights, pooling)`` converts a BERT in Hugging Face's tensor names (as
sentence-transformers ships it) the way llama.cpp's ``BertModel`` converter does: the WordPiece
vocabulary in its "phantom space" spelling, non-causal attention, the pooling named in the header;
matrices as f16, norms and biases as f32. ``bench/embedder_gguf.py`` runs it on all-MiniLM-L6-v2.

``tiny_bert(folder, pooling)`` writes a seeded random one (two layers, 32 wide, a 32-token context, a
vocabulary of whole English words): a few hundred KB that loads in milliseconds, for tests of how
Fireside pools and cuts what it embeds. ``embed(weights, config, ids, pooling)`` is the oracle: a plain
NumPy forward pass, pooled by the mean or by the first ([CLS]) token, normalized.
"""

from __future__ import annotations

from math import erf, sqrt
from pathlib import Path

import gguf
import numpy as np

MEAN, CLS = gguf.PoolingType.MEAN, gguf.PoolingType.CLS
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ("the a of and to in is it that was for on are with as be at by this have from or one had not but "
         "what all were when we there can an your which their said if do will each about how up out them then "
         "she many some so these would other into has more her two like him see time could no make than first "
         "been its who now people my made over did down only way find use may water long little very after "
         "words called just where most know cat dog sky blue river stone file python read line").split()


def phantom(token: str, kind: int) -> str:
    """llama.cpp's WordPiece spelling: continuations lose ``##``, word starts gain U+2581."""
    if kind == gguf.TokenType.CONTROL:
        return token
    return token[2:] if token.startswith("##") else "\u2581" + token


def write_bert(out: Path, config: dict, tokens: list[tuple[str, int]], weights: dict[str, np.ndarray],
               pooling: int, name: str = "bert", special: dict[str, int] | None = None) -> Path:
    """A GGUF of a BERT: ``tokens`` as (WordPiece token, gguf.TokenType) by id, ``weights`` by HF name."""
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
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
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
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)
    for hf_name, data in weights.items():
        if hf_name in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"):
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new is None:
            raise ValueError(f"no GGUF name for tensor {hf_name}")
        wide = data.ndim == 2 and not new.startswith("token_types")
        writer.add_tensor(new, np.ascontiguousarray(data, dtype=np.float16 if wide else np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


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


TINY = {"num_hidden_layers": 2, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
        "max_position_embeddings": 32, "layer_norm_eps": 1e-12, "type_vocab_size": 2}


def tiny_weights(vocab: int, config: dict = TINY, seed: int = 7) -> dict[str, np.ndarray]:
    """Seeded random weights in HF names; f16-exact, so the GGUF holds exactly what the oracle reads."""
    rng = np.random.default_rng(seed)
    h, f = config["hidden_size"], config["intermediate_size"]

    def r(*shape, scale=0.2):
        return (rng.standard_normal(shape) * scale).astype(np.float16).astype(np.float32)

    w = {"embeddings.word_embeddings.weight": r(vocab, h, scale=1.0),
         "embeddings.position_embeddings.weight": r(config["max_position_embeddings"], h),
         "embeddings.token_type_embeddings.weight": r(config["type_vocab_size"], h),
         "embeddings.LayerNorm.weight": 1 + r(h, scale=0.1), "embeddings.LayerNorm.bias": r(h, scale=0.1)}
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for m in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            w[p + m + ".weight"], w[p + m + ".bias"] = r(h, h), r(h, scale=0.05)
        w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"] = r(f, h), r(f, scale=0.05)
        w[p + "output.dense.weight"], w[p + "output.dense.bias"] = r(h, f), r(h, scale=0.05)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = 1 + r(h, scale=0.1), r(h, scale=0.1)
    return w


def tiny_bert(folder: Path, pooling: int = CLS, name: str = "tiny-bert") -> tuple[Path, dict[str, np.ndarray]]:
    """A tiny random BERT embedder at ``folder/NAME.gguf``, and its weights for the oracle."""
    tokens = [(t, gguf.TokenType.UNKNOWN if t == "[UNK]" else gguf.TokenType.CONTROL) for t in SPECIAL]
    tokens += [(word, gguf.TokenType.NORMAL) for word in dict.fromkeys(WORDS)]
    weights = tiny_weights(len(tokens))
    folder.mkdir(parents=True, exist_ok=True)
    return write_bert(folder / f"{name}.gguf", TINY, tokens, weights, pooling, name), weights
