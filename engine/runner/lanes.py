"""A second lane for long chats: the model's weights read through a second llama.cpp context whose KV
cache and attention decode deep histories faster, for the requests that were promised no exact reply.

The model's own context keeps the exact kind (q8_0 with flash attention on the CPU, ``kv_for``): a
greedy or seeded reply must be the same alone, batched, drafted or restored (issue 41), and only
that kind computes a token's row one way whatever shares its step. On some CPUs that kind decodes
deep histories well behind an f16 cache (a 2-core AMX Xeon, 4,000 tokens in: 13.5 tok/s against plain
f16 attention's 21.3; a 2-core EPYC: 42 against f16 flash attention's 53-57), and a sampled reply
without a seed is random anyway. So when the attention calibration
(``runtime/attention.py``) measured a kind that is faster from some depth on, the load opens it as a
lane (``open_lane``): the same model, a context of its own with as many slots, and a batch engine of
its own (``batch.py``). A request goes to the lane (``wants_lane``) when it samples without a seed,
carries no image (the projector evaluates into the model's context) and its prompt reaches the lane's
depth. A conversation that crosses that depth does not evaluate its history again: its slot's state
in the model's context (or the prompt cache's file of it) is converted to the lane's layout
(``convert``: q8_0 rows dequantized and un-rotated, V transposed for plain attention) and loaded into a
lane slot (``bring``); 1,538 tokens of history moved in 168 ms, where evaluating them took 8.4 s.
A greedy or seeded turn of that conversation goes back to the model's context, which still holds its
history up to where it left.

The lane's states go to the prompt cache under an identity of their own (its KV type and attention
are part of it), so both kinds of a conversation are resumed after a restart.

Runs on the runner's worker thread, like the batch engines it feeds.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from typing import Any

from .decode import common_prefix
from .kvstate import restore, snapshot

GGML_F16, GGML_Q8_0 = 1, 8
MIN_BRING = 256  # a state is brought over when it covers this many more prompt tokens than the lane holds


class LaneModel:
    """The loaded ``Llama`` seen through the lane's context: what the batch engine reads of a ``Llama``
    (its vocabulary, model, sizes) is the model's, and ``_ctx`` / ``ctx`` are the lane's."""

    def __init__(self, llama: Any, ctx: Any, kind: str, start: int, flash_attn: bool):
        self._llama, self._ctx, self.kind, self.start, self.flash_attn = llama, ctx, kind, start, flash_attn
        self._model = llama._model  # read for every sampled token: not through __getattr__

    @property
    def ctx(self) -> Any:
        return self._ctx.ctx

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)


def open_lane(llama: Any, kind: str, start: int, flash_attn: bool) -> LaneModel:
    """A context for ``llama``'s model with an f16 cache, ``flash_attn`` as given (the plan's ``kind``) and
    the model context's sizes, slots and threads; raises ``ValueError`` when llama.cpp cannot make it (no
    memory for its cache)."""
    import llama_cpp
    from llama_cpp._internals import LlamaContext

    params = type(llama.context_params).from_buffer_copy(llama.context_params)  # its slots, sizes and threads
    params.type_k = params.type_v = GGML_F16
    params.flash_attn_type = 1 if flash_attn else 0
    ctx = LlamaContext(model=llama._model, params=params, verbose=False)
    lane = LaneModel(llama, ctx, kind, start, flash_attn)
    tokens = llama.tokenize(b"Hello, warm-up", add_bos=True, special=False)[:8]  # a crash happens now, not mid-reply
    ids = (llama_cpp.llama_token * len(tokens))(*tokens)
    if llama_cpp.llama_decode(lane.ctx, llama_cpp.llama_batch_get_one(ids, len(tokens))) != 0:
        raise ValueError("llama.cpp could not decode its warm-up tokens")
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(lane.ctx), True)
    return lane


def wants_lane(lane: LaneModel | None, sampling: Any, images: list, n_tokens: int) -> bool:
    """Whether a ``generate`` request decodes in the lane: it samples without a seed (no reply was
    promised), has no image, and its prompt is as deep as the lane's start."""
    return (lane is not None and not images and n_tokens >= lane.start and sampling.seed is None
            and sampling.temperature > 0)


def hadamard(n: int) -> Any:
    """The orthonormal Walsh-Hadamard matrix of order ``n`` (a power of two), as llama.cpp builds it
    (``ggml_gen_hadamard``): symmetric, its own inverse."""
    import numpy as np

    h = np.ones((1, 1), dtype=np.float32)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.float32(np.sqrt(n))


def rotation(head_dim: int, key: bool) -> int:
    """The order of the Hadamard rotation llama.cpp applies to a quantized cache's K (``key``) or V rows
    head by head (``build_input_k_rot`` / ``build_input_v_rot``), 0 for none: K by the largest power of
    two from 64 dividing the head, V by 64, for heads a multiple of 64, unless LLAMA_ATTN_ROT_DISABLE."""
    if head_dim % 64 or int(os.environ.get("LLAMA_ATTN_ROT_DISABLE") or 0):
        return 0
    n = 64
    while key and head_dim % (2 * n) == 0:
        n *= 2
    return n


class _Reader:
    """Reads a state's fields in order (``struct`` formats) and its K or V rows as f16 values."""

    def __init__(self, data: Any, n_head_kv: int):
        self.buf, self.off, self.n_head_kv = memoryview(data).cast("B"), 0, n_head_kv

    def take(self, fmt: str) -> tuple:
        values = struct.unpack_from(fmt, self.buf, self.off)
        self.off += struct.calcsize(fmt)
        return values

    def rows(self, kind: int, size_row: int, cells: int, key: bool) -> Any:
        """``cells`` rows of ``size_row`` bytes of ggml type ``kind`` as f16 values, unrotated."""
        import numpy as np

        raw = np.frombuffer(self.buf, dtype=np.uint8, count=cells * size_row, offset=self.off)
        self.off += cells * size_row
        if kind == GGML_F16:
            return raw.view(np.float16).reshape(cells, -1)
        if kind != GGML_Q8_0 or size_row % 34:
            raise ValueError(f"a cache of ggml type {kind}")
        blocks = raw.reshape(cells, size_row // 34, 34)  # block_q8_0: an f16 scale, 32 int8 values
        scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32)
        values = (blocks[:, :, 2:].view(np.int8).astype(np.float32) * scale).reshape(cells, -1)
        n = rotation(values.shape[1] // self.n_head_kv, key)
        if n:  # each head's n-wide pieces times H (H @ H = I: the rotation undone)
            values = (values.reshape(cells, -1, n) @ hadamard(n)).reshape(cells, -1)
        return values.astype(np.float16)


def convert(data: Any, n_layer: int, n_head_kv: int, transposed: bool) -> bytearray | None:
    """A sequence's state (``llama_state_seq_get_data``) from a context whose cache holds q8_0 or f16
    rows per cell, as a context with an f16 cache holds it: q8_0 rows dequantized and turned back from
    the rotation llama.cpp stores quantized heads in (``rotation``), V transposed when ``transposed``
    (plain attention's layout). None for a state this does not read (more than one stream, cells with
    extensions, transposed already, another layer count or type).

    The layout (llama-context.cpp, llama-kv-cache.cpp ``state_write``): a magic and the sequence id;
    the streams' count; per stream its cell count and, for the one holding the sequence, each cell's
    position and sequence ids, then ``v_trans`` and the layer count, every layer's K (type, row size,
    rows), then every layer's V (the same; transposed: type, element size, width, the columns)."""
    r, out = _Reader(data, n_head_kv), bytearray()
    try:
        magic, seq_id, n_stream = r.take("<IiI")
        out += struct.pack("<IiI", magic, seq_id, n_stream)
        counts = []
        for _ in range(n_stream):
            (cells,) = r.take("<I")
            out += struct.pack("<I", cells)
            counts.append(cells)
            if cells and not _convert_stream(r, out, cells, n_layer, transposed):
                return None
        if sum(1 for c in counts if c) > 1:
            return None
    except (struct.error, ValueError):
        return None
    return out if r.off == len(r.buf) else None


def _convert_stream(r: _Reader, out: bytearray, cells: int, n_layer: int, transposed: bool) -> bool:
    """One stream's cells and K and V rows from ``r`` into ``out``; False for a shape this does not read."""
    import numpy as np

    meta = r.off
    for _ in range(cells):
        _, n_seq = r.take("<iI")
        if n_seq != 1:
            return False
        r.off += 4 * n_seq
    out += r.buf[meta:r.off]
    v_trans, layers = r.take("<II")
    if v_trans or layers != n_layer:
        return False
    out += struct.pack("<II", int(transposed), n_layer)
    for _ in range(n_layer):
        k = r.rows(*r.take("<iQ"), cells, key=True)
        out += struct.pack("<iQ", GGML_F16, k.shape[1] * 2) + k.tobytes()
    for _ in range(n_layer):
        v = r.rows(*r.take("<iQ"), cells, key=False)
        if transposed:
            out += struct.pack("<iII", GGML_F16, 2, v.shape[1]) + np.ascontiguousarray(v.T).tobytes()
        else:
            out += struct.pack("<iQ", GGML_F16, v.shape[1] * 2) + v.tobytes()
    return True


def bring(exact: Any, lane: Any, prompt: list[int]) -> int:
    """Load into an idle slot of ``lane`` (a ``BatchEngine`` on a ``LaneModel``) the longest history of
    ``prompt`` that ``exact`` (the model context's engine) holds in an idle slot or its prompt cache
    has on disk, converted, when it covers ``MIN_BRING`` more tokens than the lane holds already in a
    slot or in its own prompt cache. Returns the tokens brought (0: none); usage counts them as cached
    (``restored_tokens`` counts only states the engine restored itself)."""
    import llama_cpp as lc

    idle = [s for s in lane.slots if s.seq is None]
    if not idle:
        return 0
    held = max((common_prefix(s.tokens, prompt) for s in lane.slots), default=0)
    if len(prompt) < held + MIN_BRING:  # nothing could cover enough more (a later turn of a lane conversation)
        return 0
    own = lane.cache.lookup(prompt) if lane.cache is not None else None
    if own is not None:  # the lane's own state on disk: restored as it is, by the lane's engine
        held = max(held, own[1])
    source = max((s for s in exact.slots if s.seq is None), key=lambda s: common_prefix(s.tokens, prompt), default=None)
    n, tokens, data, started = 0, [], None, time.perf_counter()
    if source is not None:
        n, tokens = common_prefix(source.tokens, prompt), source.tokens
    hit = exact.cache.lookup(prompt) if exact.cache is not None else None
    if hit is not None and hit[1] > max(n, held) + MIN_BRING:
        data = exact.cache.read(hit[0])
        if data is not None:
            n, tokens = hit[1], hit[0].tokens
    if n < held + MIN_BRING:
        return 0
    if data is None:
        data = snapshot(exact.ctx, source.seq_id)
    model = lane.llama._model.model
    state = (convert(data, lc.llama_model_n_layer(model), lc.llama_model_n_head_kv(model), not lane.llama.flash_attn)
             if data is not None else None)
    target = lane._slot_for(prompt, idle)
    lc.llama_memory_seq_rm(lane.mem, target.seq_id, -1, -1)
    if state is None or not restore(lane.ctx, target.seq_id, state):
        lc.llama_memory_seq_rm(lane.mem, target.seq_id, -1, -1)
        target.tokens = []
        print("fireside: a conversation's state could not be brought to the long-chat lane; it is evaluated there",
              file=sys.stderr, flush=True)
        return 0
    target.tokens, target.prompt_n, target.used_at = list(tokens), n, time.monotonic()
    print(f"fireside: {n:,} tokens of history brought to the {lane.llama.kind} lane in "
          f"{(time.perf_counter() - started) * 1000:.0f} ms", file=sys.stderr, flush=True)
    return n

