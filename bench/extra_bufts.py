"""Prompt evaluation and decode speed with llama.cpp's extra buffer types on and off, side by side.

    python bench/extra_bufts.py [--model PATH] [--prompt-tokens 512] [--tokens 64] [--runs 3] [--threads N]

Extra buffer types are the CPU's AMX and repack matrix kernels: the first rung of Fireside's self-healing
ladder (engine/runtime/healing.py) turns them off after llama.cpp crashes with them. Whether to turn
them off up front on a CPU with AMX is decided by these figures, taken where both configurations run:
prompt tokens/s (a batch of ``--prompt-tokens``) and decode tokens/s, medians of alternating runs, and
the ratio off/on. Prints the CPU and whether it has AMX, since that is where the two differ most.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import time
from pathlib import Path

import llama_cpp

from fireside.engine.library.starter import starter_path
from fireside.engine.runtime.healing import cpu_has_amx


def _cpu() -> tuple[str, bool]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU", False
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    return name, cpu_has_amx()


def load(path: str, extra_bufts: bool, threads: int, ctx: int) -> llama_cpp.Llama:
    default = llama_cpp.llama_model_default_params

    def params():
        p = default()
        p.use_extra_bufts = extra_bufts
        return p

    llama_cpp.llama_cpp.llama_model_default_params = params
    llama_cpp.llama.llama_cpp.llama_model_default_params = params
    try:
        return llama_cpp.Llama(model_path=path, n_ctx=ctx, n_batch=512, n_threads=threads, verbose=False)
    finally:
        llama_cpp.llama_cpp.llama_model_default_params = default
        llama_cpp.llama.llama_cpp.llama_model_default_params = default


def decode(llm: llama_cpp.Llama, tokens: list[int]) -> None:
    """One llama_decode of ``tokens`` after what the context holds (positions follow on)."""
    ids = (llama_cpp.llama_token * len(tokens))(*tokens)
    batch = llama_cpp.llama_batch_get_one(ids, len(tokens))
    if llama_cpp.llama_decode(llm.ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")


def one_run(llm: llama_cpp.Llama, prompt: list[int], n_decode: int) -> tuple[float, float]:
    """(prompt tokens/s, decode tokens/s) for one fresh prompt and ``n_decode`` greedy tokens."""
    mem = llama_cpp.llama_get_memory(llm.ctx)
    llama_cpp.llama_memory_clear(mem, True)
    started = time.perf_counter()
    for i in range(0, len(prompt), 512):
        decode(llm, prompt[i:i + 512])
    prompt_s = time.perf_counter() - started
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    started = time.perf_counter()
    for _ in range(n_decode):
        logits = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
        row = ctypes.cast(logits, ctypes.POINTER(ctypes.c_float * n_vocab)).contents
        decode(llm, [_argmax(row, n_vocab)])
    decode_s = time.perf_counter() - started
    return len(prompt) / prompt_s, n_decode / decode_s


def _argmax(row, n: int) -> int:
    import numpy as np

    return int(np.ctypeslib.as_array(row, shape=(n,)).argmax())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(starter_path() or ""))
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    cpu, amx = _cpu()
    print(f"CPU: {cpu} (AMX: {'yes' if amx else 'no'}); llama-cpp-python {llama_cpp.__version__}; "
          f"{llama_cpp.llama_print_system_info().decode().strip()}")
    print(f"model {Path(args.model).name}, {args.threads} threads, {args.prompt_tokens}-token prompt, "
          f"{args.tokens} decoded tokens, {args.runs} alternating runs each")
    models = {on: load(args.model, on, args.threads, args.prompt_tokens + args.tokens + 16) for on in (True, False)}
    text = ("The history of sailing ships spans thousands of years and many seas. " * 200).encode()
    prompt = models[True].tokenize(text, add_bos=True)[: args.prompt_tokens]
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(args.runs + 1):  # the first round warms caches and is dropped
        for on in (True, False):
            results[on].append(one_run(models[on], prompt, args.tokens))
    med = {on: (statistics.median(r[0] for r in rs[1:]), statistics.median(r[1] for r in rs[1:]))
           for on, rs in results.items()}
    print(f"{'extra buffer types':<20}{'prompt tok/s':>14}{'decode tok/s':>14}")
    for on in (True, False):
        print(f"{'on' if on else 'off':<20}{med[on][0]:>14.1f}{med[on][1]:>14.1f}")
    print(f"{'ratio off/on':<20}{med[False][0] / med[True][0]:>14.2f}{med[False][1] / med[True][1]:>14.2f}")


if __name__ == "__main__":
    main()
