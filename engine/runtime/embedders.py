"""How a model is loaded to embed: the pooling llama.cpp applies and the context an encoder can hold.

A dedicated embedder's GGUF names its pooling (CLS for bge, the mean for all-MiniLM and nomic-embed), and
an encoder (non-causal attention: BERT and its kin) has learned positions, so its context stops at them;
a chat model used as an embedder names neither, and is pooled by the mean (llama.cpp would otherwise give
one vector per token). Every embedding load evaluates an input in one batch as long as its context, so
llama-cpp-python does not cut it at the batch.
"""

from __future__ import annotations

from ..models import ModelInfo

MEAN = 1  # llama.cpp's LLAMA_POOLING_TYPE_MEAN
OWN = -1  # LLAMA_POOLING_TYPE_UNSPECIFIED: the model's own, from its GGUF


def embedder_facts(info: ModelInfo) -> tuple[int, int | None]:
    """``(pooling, positions)`` for an embedding load of the model ``info`` describes: the llama.cpp
    pooling type, and an encoder's trained positions (None for a decoder, whose context is the plan's)."""
    arch, meta = info.architecture, info.metadata
    pooling = OWN if f"{arch}.pooling_type" in meta else MEAN
    return pooling, (info.context_length or None) if info.embeds_only else None


def embedding_kwargs(pooling: int, positions: int | None, kwargs: dict) -> dict:
    """The llama.cpp settings an embedding load adds to ``kwargs`` (the plan's): a batch as long as the
    context, and for an encoder a context no longer than its positions and one micro-batch as long
    (llama.cpp evaluates a non-causal input in one)."""
    n_ctx = int(kwargs.get("n_ctx") or 512)
    if positions:
        n_ctx = min(n_ctx, positions)
    out = {"embedding": True, "pooling_type": pooling, "n_ctx": n_ctx, "n_batch": n_ctx}
    if positions:
        out["n_ubatch"] = n_ctx
    return out
