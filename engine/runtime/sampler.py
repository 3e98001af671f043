"""Per-sequence sampling: one llama.cpp sampler chain per request, and log-probabilities from a logits row.

Runs on the runner's worker thread. The chain follows llama-cpp-python's own order (penalties over
the last ``repeat_last_n`` tokens, the grammar, then greedy at temperature 0, or top-k, typical,
top-p, min-p, temperature and a seeded dist sampler; with ``mirostat`` 1 or 2, temperature and then
Mirostat in place of the truncating samplers, as llama.cpp's own sampler does), so a request
samples as it did through ``Llama.generate``.
Each sequence owns its chain, so its seed, penalties and grammar state never mix with another's.
"""

from __future__ import annotations

import math
import random
from typing import Any

from ..types import Sampling, TokenLogprob

MIROSTAT_M = 100  # the tokens Mirostat v1 estimates its s_hat from (llama.cpp's and llama-cpp-python's value)
MAX_TOP_LOGPROBS = 20


class Chain:
    """A llama.cpp sampler chain; ``free`` it when the request ends."""

    def __init__(self, llama: Any, s: Sampling, grammar: str | None):
        import llama_cpp as lc

        self.ptr = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        add = self._add
        add(lc.llama_sampler_init_penalties(llama.n_vocab(), _last_n(llama, s.repeat_last_n), s.repeat_penalty,
                                            s.frequency_penalty, s.presence_penalty))
        if grammar:
            g = lc.llama_sampler_init_grammar(llama._model.vocab, grammar.encode("utf-8"), b"root")
            if not g:
                self.free()
                raise ValueError("the grammar could not be parsed")
            add(g)
        if s.temperature == 0:
            add(lc.llama_sampler_init_greedy())
            return
        seed = (s.seed if s.seed is not None else random.randrange(2**31)) & 0xFFFFFFFF
        if s.mirostat in (1, 2):  # as llama.cpp's common sampler: temperature, then Mirostat picks the token
            add(lc.llama_sampler_init_temp(s.temperature))
            if s.mirostat == 1:
                add(lc.llama_sampler_init_mirostat(llama.n_vocab(), seed, s.mirostat_tau, s.mirostat_eta, MIROSTAT_M))
            else:
                add(lc.llama_sampler_init_mirostat_v2(seed, s.mirostat_tau, s.mirostat_eta))
            return
        add(lc.llama_sampler_init_top_k(s.top_k))
        add(lc.llama_sampler_init_typical(s.typical_p, 1))
        add(lc.llama_sampler_init_top_p(s.top_p, 1))
        add(lc.llama_sampler_init_min_p(s.min_p, 1))
        add(lc.llama_sampler_init_temp(s.temperature))
        add(lc.llama_sampler_init_dist(seed))

    def _add(self, sampler: Any) -> None:
        import llama_cpp as lc

        lc.llama_sampler_chain_add(self.ptr, sampler)  # the chain owns it from here

    def sample(self, ctx: Any, idx: int) -> int:
        """Sample (and accept) the next token from output row ``idx`` of the last decode."""
        import llama_cpp as lc

        return lc.llama_sampler_sample(self.ptr, ctx, idx)

    def free(self) -> None:
        import llama_cpp as lc

        if self.ptr:
            lc.llama_sampler_free(self.ptr)
            self.ptr = None


def _last_n(llama: Any, n: int) -> int:
    """The penalties' window: ``n`` tokens, at most as many as one slot holds (llama.cpp allocates a
    ring of that size: a client's 2**31 must not become a 16 GiB allocation in the shared runner);
    -1, Ollama's and llama.cpp's "the whole context", is that too (llama.cpp's sampler reads -1 as off)."""
    import llama_cpp as lc

    n_ctx = lc.llama_n_ctx_seq(llama._ctx.ctx)
    return n_ctx if n < 0 else min(n, n_ctx)


def token_logprob(llama: Any, ctx: Any, idx: int, token: int, k: int) -> TokenLogprob:
    """The log-probability of ``token`` in output row ``idx``, with the ``k`` most likely alternatives."""
    import llama_cpp as lc
    import numpy as np

    n_vocab = llama.n_vocab()
    row = np.ctypeslib.as_array(lc.llama_get_logits_ith(ctx, idx), shape=(n_vocab,)).astype(np.float64)
    peak = row.max()
    lse = peak + math.log(float(np.exp(row - peak).sum()))
    k = max(0, min(k, MAX_TOP_LOGPROBS))
    top: list[tuple[str, float]] = []
    if k:
        best = np.argpartition(-row, k)[:k]
        best = best[np.argsort(-row[best], kind="stable")]
        top = [(_piece(llama, int(t)), float(row[t] - lse)) for t in best]
    return TokenLogprob(_piece(llama, token), float(row[token] - lse), top)


def _piece(llama: Any, token: int) -> str:
    return llama._model.detokenize([token]).decode("utf-8", errors="replace")
