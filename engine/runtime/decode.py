"""The decode loop: tokenize a prompt, reuse the cached prefix, sample, detokenize, stop.

Runs on the runner's worker thread (the only thread that touches the ``Llama``). Yields event dicts
(``text`` pieces, then one ``done`` with usage and the stop reason) that the runner sends to the parent.
The cancel event is checked between tokens, so Stop takes effect within one token. Stop strings are
honoured across token boundaries: text that could be the start of a stop string is held back until
it is decided, so a stop string never reaches the user.
"""

from __future__ import annotations

import codecs
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

from .tokens import prompt_tokens


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _held_suffix(text: str, stops: list[str]) -> int:
    best = 0
    for stop in stops:
        for n in range(min(len(stop) - 1, len(text)), 0, -1):
            if text.endswith(stop[:n]):
                best = max(best, n)
                break
    return best


def decode_stream(llama: Any, msg: dict, cancel: threading.Event) -> Iterator[dict]:
    import llama_cpp

    started = time.perf_counter()
    s = msg["sampling"]
    prompt: str = msg["prompt"]
    tokens = prompt_tokens(llama, prompt, msg.get("add_bos", False))
    n_ctx = llama.n_ctx()
    if len(tokens) >= n_ctx:
        yield {"type": "error", "error": "ContextOverflow", "prompt_tokens": len(tokens), "context": n_ctx,
               "message": f"the prompt is {len(tokens):,} tokens but the context holds {n_ctx:,}"}
        return
    cached = _common_prefix(list(llama._input_ids[: llama.n_tokens]), tokens)
    cached = min(cached, len(tokens) - 1)  # llama-cpp-python re-evaluates at least the last token
    room = n_ctx - len(tokens)
    max_tokens = min(s.max_tokens, room) if s.max_tokens else room
    llama.set_seed(s.seed if s.seed is not None else random.randrange(2**31))
    grammar = llama_cpp.LlamaGrammar.from_string(msg["grammar"], verbose=False) if msg.get("grammar") else None
    vocab = llama._model.vocab
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    stops = [x for x in s.stop if x]
    held, n_out, first_at, finish = "", 0, None, "length"
    gen = llama.generate(
        tokens, top_k=s.top_k, top_p=s.top_p, min_p=s.min_p, temp=s.temperature,
        repeat_penalty=s.repeat_penalty, frequency_penalty=s.frequency_penalty,
        presence_penalty=s.presence_penalty, grammar=grammar, reset=True,
    )
    try:
        for token in gen:
            if first_at is None:
                first_at = time.perf_counter()
            if cancel.is_set():
                finish = "cancelled"
                break
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                finish = "stop"
                break
            n_out += 1
            held += decoder.decode(llama._model.detokenize([token]))
            hits = [held.find(x) for x in stops if x in held]
            if hits:
                held, finish = held[: min(hits)], "stop"
                break
            keep = _held_suffix(held, stops)
            if len(held) > keep:
                yield {"type": "text", "text": held[: len(held) - keep]}
                held = held[len(held) - keep:]
            if n_out >= max_tokens:
                break
    finally:
        gen.close()
    held += decoder.decode(b"", final=True)
    if held:
        yield {"type": "text", "text": held}
    yield {"type": "done", "finish_reason": finish, "usage": _usage(started, first_at, len(tokens), cached, n_out)}


def _usage(started: float, first_at: float | None, n_prompt: int, cached: int, n_out: int) -> dict:
    from .types import Usage

    end = time.perf_counter()
    first_at = first_at or end
    ttft = first_at - started
    decode_s = end - first_at
    return Usage(
        prompt_tokens=n_prompt,
        completion_tokens=n_out,
        cached_tokens=cached,
        ttft_s=ttft,
        decode_tokens_per_s=(n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0,
        prompt_tokens_per_s=(n_prompt - cached) / ttft if ttft > 0 else 0.0,
        total_s=end - started,
    ).to_dict()
