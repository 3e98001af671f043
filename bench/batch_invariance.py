"""Whether a token's logits depend on the batch it is computed in, for a model file and this llama.cpp build.

    python bench/batch_invariance.py MODEL.gguf [--extra-bufts on|off] [--threads 2]
        [--attention q8_0+fa|f16+fa|f16] [--depth N]

"Same request, same reply" (tests/server/test_same_reply.py) needs each token's logits to be a function
of the tokens before it alone. The KV cache side is settled by ``exactness.kv_for``; this checks the
weights' side, which depends on the quantization type and the CPU: the same continuation tokens are
decoded one at a time (what plain decoding does), verified n at a time (what a draft's verification
does) and as one row of a four-sequence batch (what other streams do), on a q8_0 cache with flash
attention, as Fireside loads a CPU model. Prints the largest logit difference per token against the
one-at-a-time run and SAME or DIFFERENT per case, then llama.cpp's system info.

Found on llama-cpp-python 0.3.36 (issue 50): Q4_0 and Q4_1 are SAME everywhere; with extra buffer
types on an AVX2 build, Q4_K's repacked gemm (4+ rows) and gemv (1-3 rows) differ; with them off,
batches of K-quant weights (Q4_K, Q6_K) take the tiled kernel, which rounds differently from the
one-row kernel: DIFFERENT at 8 rows on the AMX Xeon's build too, SAME with ``GGML_CPU_TILED_MM=0``.
A Q4_K_M starter copy also DIFFERS as one of four rows with extra buffer types on (the repacked gemm).
An IQ4_NL copy (three of its tensors fall back to Q5_K) DIFFERS from its first batched token with
extra buffer types off and ``GGML_CPU_TILED_MM=0`` as well: batches of IQ4_NL take llamafile's sgemm,
built in with no run-time switch (exactness.SGEMM_VARIANT_TYPES: such a load's replies are not guaranteed).

``--attention`` asks the same of the KV cache's side (issue 47: is plain attention, the faster kind deep in a
long chat on some CPUs, exact too?). On the starter, an AVX-512 AMD EPYC, extra buffer types off, at depth 0
and 700: q8_0+fa SAME everywhere; plain f16 SAME on 1, 2 and 3 threads and beside three other streams (each
sequence has its own cache stream, ``kvstreams.sequences``) but DIFFERENT (up to 0.85) for every token after
the first of a batch of 2 or more of one sequence, alike for 2, 3, 4, 5 and 8: a sequence's one-row and
multi-row attention products round differently, so drafts' verification and a cold prompt's last token
differ from what plain decoding gives. f16+fa SAME at these short shapes (its tiled prompt kernel and
split decode start at 64-token chunks and 512 cells; issue 41).
"""

from __future__ import annotations

import argparse
import ctypes

import numpy as np

PROMPT = b"The harbour town keeps a logbook of every ship that came in since 1802: the name, the cargo, the weather."
CONTINUATION = b" The first entry reads: the brig Mary, wool and salt, fair wind, met by the harbourmaster himself."
OTHERS = [b"Name three rivers in Europe.", b"What is a prime number?", b"Describe a lighthouse."]
Q8_0 = 8  # ggml's type id


FILLER = b" The tide tables for the harbour are printed each spring and pinned by the door of the inn."
ATTENTION = {"q8_0+fa": (Q8_0, True), "f16+fa": (1, True), "f16": (1, False)}  # ggml type id, flash attention


class Probe:
    def __init__(self, path: str, extra_bufts: bool, threads: int, attention: str = "q8_0+fa", depth: int = 0):
        import llama_cpp as lc

        from fireside.engine.runner.kvstreams import sequences
        from fireside.engine.runner.process import model_params

        self.lc = lc
        kv, fa = ATTENTION[attention]
        self.threads = threads
        kw = dict(model_path=path, n_ctx=4 * (depth + 512), n_batch=512, n_ubatch=512, flash_attn=fa,
                  verbose=False, type_k=kv, type_v=kv, n_seq_max=4, n_threads=threads, n_threads_batch=threads)
        with model_params(extra_bufts), sequences(kw) as seq_kw:
            self.llm = lc.Llama(**seq_kw)
        self.ctx = self.llm._ctx.ctx
        self.n_vocab = lc.llama_vocab_n_tokens(lc.llama_model_get_vocab(self.llm._model.model))
        self.batch = lc.llama_batch_init(512, 0, 4)
        filler = self.llm.tokenize(FILLER * (1 + depth // 16))[:depth]
        self.prompt = filler + self.llm.tokenize(PROMPT, add_bos=not filler)
        self.cont = self.llm.tokenize(CONTINUATION, add_bos=False)[:8]
        self.others = [self.llm.tokenize(t) for t in OTHERS]

    def run(self, rows: list[tuple[int, int, int, bool]]) -> list[np.ndarray]:
        """Decode ``rows`` (token, position, sequence, logits wanted) as one batch; the wanted logits."""
        b = self.batch
        for i, (tok, pos, seq, want) in enumerate(rows):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tok, pos, 1, want
            b.seq_id[i][0] = seq
        b.n_tokens = len(rows)
        assert self.lc.llama_decode(self.ctx, b) == 0
        out = []
        for i, row in enumerate(rows):
            if row[3]:
                ptr = ctypes.cast(self.lc.llama_get_logits_ith(self.ctx, i), ctypes.POINTER(ctypes.c_float))
                out.append(np.ctypeslib.as_array(ptr, (self.n_vocab,)).copy())
        return out

    def fresh(self) -> None:
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)
        for s in range(0, len(self.prompt), 512):
            self.run([(t, s + i, 0, False) for i, t in enumerate(self.prompt[s:s + 512])])

    def verified(self, n: int) -> list[np.ndarray]:
        self.fresh()
        got, start = [], len(self.prompt)
        for s in range(0, len(self.cont), n):
            got += self.run([(t, start + s + j, 0, True) for j, t in enumerate(self.cont[s:s + n])])
        return got

    def on_threads(self, threads: int) -> list[np.ndarray]:
        self.lc.llama_set_n_threads(self.ctx, threads, threads)
        try:
            return self.verified(1)
        finally:
            self.lc.llama_set_n_threads(self.ctx, self.threads, self.threads)

    def beside_others(self, first: bool) -> list[np.ndarray]:
        self.fresh()
        for seq, other in enumerate(self.others, 1):
            self.run([(t, i, seq, False) for i, t in enumerate(other)])
        got = []
        for i, t in enumerate(self.cont):
            rows = [(o[i % len(o)], len(o) + i, seq, False) for seq, o in enumerate(self.others, 1)]
            mine = (t, len(self.prompt) + i, 0, True)
            got += self.run([mine, *rows] if first else [*rows, mine])
        return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--extra-bufts", choices=("on", "off"), default="on")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--attention", choices=tuple(ATTENTION), default="q8_0+fa")
    ap.add_argument("--depth", type=int, default=0, help="tokens of filler history before the prompt")
    args = ap.parse_args()
    probe = Probe(args.model, args.extra_bufts == "on", args.threads, args.attention, args.depth)
    single = probe.verified(1)
    cases = {f"verified {n} at a time": lambda n=n: probe.verified(n) for n in (2, 3, 4, 5, 8)}
    cases.update({f"alone on {t} thread(s)": lambda t=t: probe.on_threads(t) for t in (1, 3) if t != args.threads})
    cases["beside 3 streams (first row)"] = lambda: probe.beside_others(True)
    cases["beside 3 streams (last row)"] = lambda: probe.beside_others(False)
    for name, case in cases.items():
        diffs = [float(np.abs(a - b).max()) for a, b in zip(single, case(), strict=True)]
        print(f"{name:30s} max |logit difference| per token: {' '.join(f'{d:.2g}' for d in diffs)}  "
              f"{'SAME' if max(diffs) == 0 else 'DIFFERENT'}", flush=True)
    print(probe.lc.llama_print_system_info().decode())


if __name__ == "__main__":
    main()
