"""The context a runner decodes in: one llama.cpp sequence per slot, each with a KV stream of its own.

``sequences`` opens around the model's ``llama_cpp.Llama(...)`` (and a draft model's) to give its context
``n_seq_max`` sequences of ``n_ctx`` tokens each; ``slot_context`` reads back how many tokens one holds.
The batch engine (``batch.py``) decodes each slot's request in the slot's sequence. Runs on the runner's
worker thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def sequences(kwargs: dict) -> Iterator[dict]:
    """Open around ``llama_cpp.Llama(**kw)`` where ``kw`` is what this yields for the plan's ``kwargs``:
    its context then holds ``n_seq_max`` sequences, each with a KV stream of its own of ``n_ctx``
    tokens (``Llama`` has no parameter for either, so its default context params are wrapped).

    A stream of its own per slot keeps a sequence's cells in position order whatever the others do,
    so its numerics, and with them a seeded reply, do not depend on what else is being decoded.
    (In one unified cache, cells freed by one slot are reused by another out of position order,
    and attention then sums the same terms in another order.)"""
    import llama_cpp

    kw = dict(kwargs)
    n_seq = max(1, kw.pop("n_seq_max", 1))
    if kw.get("embedding"):
        n_seq = 1  # Llama sets up its own sequences for embeddings
    kw["n_ctx"] = kw.get("n_ctx", 512) * n_seq
    default_params = llama_cpp.llama_context_default_params

    def params():
        p = default_params()
        p.n_seq_max, p.kv_unified = n_seq, False
        return p

    llama_cpp.llama_cpp.llama_context_default_params = params  # the module llama.py reads it from
    try:
        yield kw
    finally:
        llama_cpp.llama_cpp.llama_context_default_params = default_params


def slot_context(llama: Any) -> int:
    """The tokens one sequence (slot) can hold."""
    import llama_cpp

    return llama_cpp.llama_n_ctx_seq(llama._ctx.ctx)
