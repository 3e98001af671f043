"""Tiny BERT embedders in GGUF for tests, written by the engine's converter (``engine/models/bert.py``:
``write_bert``, and ``embed``, the NumPy oracle to check llama.cpp against, re-exported here).

``tiny_bert(folder, pooling)`` writes a seeded random one (two layers, 32 wide, a 32-token context, a
vocabulary of whole English words): a few hundred KB that loads in milliseconds, for tests of how
Fireside pools and cuts what it embeds.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from fireside.engine.models.bert import CLS, MEAN, SPECIAL, embed, phantom, write_bert

__all__ = ["CLS", "MEAN", "SPECIAL", "TINY", "WORDS", "embed", "phantom", "tiny_bert", "tiny_weights", "write_bert"]

WORDS = ("the a of and to in is it that was for on are with as be at by this have from or one had not but "
         "what all were when we there can an your which their said if do will each about how up out them then "
         "she many some so these would other into has more her two like him see time could no make than first "
         "been its who now people my made over did down only way find use may water long little very after "
         "words called just where most know cat dog sky blue river stone file python read line").split()


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
