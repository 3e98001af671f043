"""Per-sequence sampling: one llama.cpp sampler chain per request, and log-probabilities from a logits row.

Runs on the runner's worker thread. The chain follows llama-cpp-python's own order (penalties over
the last ``repeat_last_n`` tokens, the grammar, then greedy at temperature 0, or top-k, typical,
top-p, min-p, temperature and a seeded dist sampler; with ``mirostat`` 1 or 2, temperature and then
Mirostat in place of the truncating samplers, as llama.cpp's own sampler does), so a request
samples as it did through ``Llama.generate``.
Each sequence owns its chain, so its seed, penalties and grammar state never mix with another's.

The repetition penalties are the chain's first step, but over a window of up to ``OWN_PENALTY_WINDOW``
tokens they are applied here (``Penalties``), in place on the logits row, to just the tokens in the
window, with llama.cpp's float32 arithmetic: its own sampler looks every vocabulary entry up in its
table, about 100 µs a token for SmolLM2's 49,152 (measured; the whole greedy sample then takes 30),
time in which every other sequence of a batched step waits. The row is put back after sampling, so
log-probabilities stay those of the model. Greedy sampling with no grammar is the row's argmax
(5 µs, against 30 for llama.cpp's greedy sampler, which first copies the row into candidates).

With a grammar the chain is run in two halves (the penalties and the grammar, then the rest) on a
candidate array of our own, so a row the grammar masks completely (every candidate -inf: no token can
continue) is seen before anything is accepted: llama.cpp would pick a masked token anyway and abort
the whole runner in ``llama_grammar_accept_impl``. That request ends with ``DeadEnd`` instead, and
the other slots go on. With a grammar the control tokens are masked too (``control_tokens``): what the
grammar admits must reach the client as text, and a control token's text never does.
"""

from __future__ import annotations

import ctypes
import math
import random
import weakref
from collections import deque
from typing import Any

from ..types import Sampling, TokenLogprob
from .tokens import piece

MIROSTAT_M = 100  # the tokens Mirostat v1 estimates its s_hat from (llama.cpp's and llama-cpp-python's value)
MAX_TOP_LOGPROBS = 20
OWN_PENALTY_WINDOW = 256  # past this many tokens llama.cpp's penalty sampler (one pass over the vocabulary) is cheaper


class DeadEnd(Exception):
    """The grammar allows no token at this step: nothing can be accepted without aborting the runner."""


class Chain:
    """A llama.cpp sampler chain; ``free`` it when the request ends.

    With a grammar, ``mask`` is the first half of the chain (llama.cpp's penalties, if used, and the
    grammar) and ``ptr`` the second (the samplers that pick), so the masked row can be checked in
    between; together they apply and accept in the order one chain would."""

    def __init__(self, llama: Any, s: Sampling, grammar: str | None):
        import llama_cpp as lc

        self.ptr = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        self.mask: Any = None
        self.candidates: Any = None  # the candidate array a grammar chain samples from, made once
        self.penalties: Penalties | None = None
        add = self._add
        self.n_vocab = llama.n_vocab()
        last_n = _last_n(llama, s.repeat_last_n)
        own = last_n <= OWN_PENALTY_WINDOW and s.repeat_penalty > 0
        if own:
            penalties = Penalties(last_n, s.repeat_penalty, s.frequency_penalty, s.presence_penalty)
            self.penalties = None if penalties.off else penalties
        else:
            add(lc.llama_sampler_init_penalties(self.n_vocab, last_n, s.repeat_penalty,
                                                s.frequency_penalty, s.presence_penalty))
        # greedy with nothing else in the chain: the top logit, as llama.cpp's greedy sampler picks it
        # (the first of equals), without copying the row into a candidate array first
        self.argmax = own and s.temperature == 0 and not grammar
        self.banned = eog_tokens(llama) if s.ignore_eos else ()  # masked in the row before any sampler
        if grammar:  # the grammar's text in ordinary tokens: a control token matches it but reads as nothing
            self.banned = (*self.banned, *control_tokens(llama))
            g = lc.llama_sampler_init_grammar(llama._model.vocab, grammar.encode("utf-8"), b"root")
            if not g:
                self.free()
                raise ValueError("the grammar could not be parsed")
            add(g)
            self.mask, self.ptr = self.ptr, lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
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

        if self.penalties is None and not self.argmax and self.mask is None and not self.banned:
            return lc.llama_sampler_sample(self.ptr, ctx, idx)
        row = lc.llama_get_logits_ith(ctx, idx)
        saved = self.penalties.apply(row) if self.penalties else []
        for tok in self.banned:
            saved.append((tok, row[tok]))
            row[tok] = -math.inf
        try:
            if self.argmax:
                token = self._top(ctx, idx)
            elif self.mask is not None:
                token = self._guided(row)
            else:
                token = lc.llama_sampler_sample(self.ptr, ctx, idx)
        finally:
            for tok, value in reversed(saved):  # a token both penalized and banned gets its first value back
                row[tok] = value
        if self.penalties:
            self.penalties.accept(token)
        return token

    def _guided(self, row: Any) -> int:
        """What ``llama_sampler_sample`` does (candidates from the row, apply, accept), with a check
        between the grammar and the samplers that pick: raises ``DeadEnd`` if the grammar masked every
        candidate (or the pick is a masked one), before anything is accepted."""
        import llama_cpp as lc
        import numpy as np

        if self.candidates is None:
            self.candidates = (lc.llama_token_data * self.n_vocab)()
            self.ids = np.arange(self.n_vocab, dtype=np.int32)
        view = np.ctypeslib.as_array(self.candidates)
        view["id"] = self.ids  # the samplers sort and cut the array: every step starts from the whole row
        view["logit"] = np.ctypeslib.as_array(row, shape=(self.n_vocab,))
        view["p"] = 0.0
        cur = lc.llama_token_data_array(data=self.candidates, size=self.n_vocab, selected=-1, sorted=False)
        lc.llama_sampler_apply(self.mask, ctypes.byref(cur))
        alive = np.ctypeslib.as_array(cur.data, shape=(cur.size,))["logit"] if cur.size else None
        if alive is None or not (alive > -np.inf).any():
            raise DeadEnd("every token is masked by the grammar")
        lc.llama_sampler_apply(self.ptr, ctypes.byref(cur))
        if not 0 <= cur.selected < cur.size or cur.data[cur.selected].logit == -math.inf:
            raise DeadEnd("the samplers picked a token the grammar masks")
        token = int(cur.data[cur.selected].id)
        lc.llama_sampler_accept(self.mask, token)
        lc.llama_sampler_accept(self.ptr, token)
        return token

    def _top(self, ctx: Any, idx: int) -> int:
        return int(logits_row(ctx, idx, self.n_vocab).argmax())

    def free(self) -> None:
        import llama_cpp as lc

        if self.ptr:
            lc.llama_sampler_free(self.ptr)
            self.ptr = None
        if self.mask:
            lc.llama_sampler_free(self.mask)
            self.mask = None


_EOG: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a loaded model's end-of-generation tokens


def eog_tokens(llama: Any) -> tuple[int, ...]:
    """The tokens that end a generation in ``llama``'s vocabulary (EOS, EOT, ``<|im_end|>``, ...), read
    once per loaded model (a pass over the vocabulary costs ~10 ms)."""
    import llama_cpp as lc

    if llama not in _EOG:
        vocab = llama._model.vocab
        _EOG[llama] = tuple(t for t in range(llama.n_vocab()) if lc.llama_vocab_is_eog(vocab, t))
    return _EOG[llama]


_CONTROL: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a loaded model's control tokens


def control_tokens(llama: Any) -> tuple[int, ...]:
    """The control tokens of ``llama``'s vocabulary that do not end a generation (``<|im_start|>``,
    ``<think>`` where it is one token, ...). A grammar matches such a token by its text, but a reply's
    text leaves control tokens out, so a grammar that spells ``<|im_start|>`` (a JSON-schema ``const``)
    would reach the client without it; masked, the grammar's text is spelled in ordinary tokens. The
    end-of-generation tokens stay: the grammar itself allows them only where the text is complete."""
    import llama_cpp as lc

    if llama not in _CONTROL:
        vocab = llama._model.vocab
        _CONTROL[llama] = tuple(t for t in range(llama.n_vocab()) if lc.llama_vocab_get_attr(vocab, t)
                                & lc.LLAMA_TOKEN_ATTR_CONTROL and not lc.llama_vocab_is_eog(vocab, t))
    return _CONTROL[llama]


def _f32(x: float) -> float:
    return ctypes.c_float(x).value


class Penalties:
    """llama.cpp's repetition penalties (``llama_sampler_init_penalties``) over the last ``last_n``
    sampled tokens: a token seen ``n`` times has its logit multiplied (if <= 0) or divided by
    ``repeat``, then lowered by ``n * freq + present``, each step rounded to float32 as there."""

    def __init__(self, last_n: int, repeat: float, freq: float, present: float):
        self.repeat, self.freq, self.present = _f32(repeat), _f32(freq), _f32(present)
        self.off = last_n <= 0 or (self.repeat == 1.0 and self.freq == 0.0 and self.present == 0.0)
        self.window: deque[int] = deque(maxlen=max(last_n, 1))
        self.counts: dict[int, int] = {}

    def apply(self, row: Any) -> list[tuple[int, float]]:
        """Penalize ``row`` (a float32 pointer) in place; returns the (token, logit) pairs it changed."""
        saved = []
        repeat, freq, present = self.repeat, self.freq, self.present
        for tok, n in self.counts.items():
            value = row[tok]
            saved.append((tok, value))
            penalized = value * repeat if value <= 0 else value / repeat
            if freq or present:
                penalized = _f32(penalized) - _f32(n * freq + present)
            row[tok] = penalized  # stored as float32: one rounding, as float arithmetic there
        return saved

    def accept(self, token: int) -> None:
        if len(self.window) == self.window.maxlen:
            old = self.window[0]
            self.counts[old] -= 1
            if not self.counts[old]:
                del self.counts[old]
        self.window.append(token)
        self.counts[token] = self.counts.get(token, 0) + 1


def _last_n(llama: Any, n: int) -> int:
    """The penalties' window: ``n`` tokens, at most as many as one slot holds (llama.cpp allocates a
    ring of that size: a client's 2**31 must not become a 16 GiB allocation in the shared runner);
    -1, Ollama's and llama.cpp's "the whole context", is that too (llama.cpp's sampler reads -1 as off)."""
    import llama_cpp as lc

    n_ctx = lc.llama_n_ctx_seq(llama._ctx.ctx)
    return n_ctx if n < 0 else min(n, n_ctx)


_views: dict[tuple[int, int], Any] = {}  # (row address, n_vocab) -> a numpy view of that row
_row_address: Any = None


def logits_row(ctx: Any, idx: int, n_vocab: int) -> Any:
    """Output row ``idx`` of the last decode as a float32 numpy array (a view: no copy).

    Making a view costs ~20 us (``np.ctypeslib.as_array`` builds an array interface each time), more
    than the argmax it serves, and a step makes one per sequence. The output buffer stays put from
    step to step, so views are kept by row address (looked up through a ``c_void_p`` copy of
    ``llama_get_logits_ith``): a view is only an address and a length, and is used only when llama.cpp
    has just returned that address for a row of ``n_vocab`` floats, so a reallocated buffer cannot
    make one stale."""
    global _row_address
    import llama_cpp as lc
    import numpy as np

    if _row_address is None:
        fn = lc.llama_cpp._lib["llama_get_logits_ith"]  # indexing makes a new function object: ours to retype
        fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int32], ctypes.c_void_p
        _row_address = fn
    key = (_row_address(ctx, idx), n_vocab)
    view = _views.get(key)
    if view is None:
        if len(_views) > 256:  # rows of many batch shapes over a long life: start again
            _views.clear()
        view = _views[key] = np.ctypeslib.as_array((ctypes.c_float * n_vocab).from_address(key[0]))
    return view


def token_logprob(llama: Any, ctx: Any, idx: int, token: int, k: int) -> TokenLogprob:
    """The log-probability of ``token`` in output row ``idx``, with the ``k`` most likely alternatives."""
    import numpy as np

    row = logits_row(ctx, idx, llama.n_vocab()).astype(np.float64)
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
    return piece(llama, token).decode("utf-8", errors="replace")
