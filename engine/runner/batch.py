"""Continuous batching: several requests decoded together in one llama.cpp context, as llama-server does.

The context holds ``n_slots`` sequences, each with its own KV stream of the loaded context (see
``kvstreams.py`` for why not one unified cache). Each step gathers the next token of every generating
sequence plus a chunk of prompt tokens of sequences still evaluating their prompt (chunked prefill:
a long new prompt shares each step with the streams already running instead of stalling them), runs
one ``llama_decode``, and samples each sequence from its own logits row with its own sampler chain.

Slots keep the tokens their cache holds after a reply ends. A new request takes the idle slot holding
its conversation (the prompt keeps all of that slot's last prompt and half of it is shared: turn N of
a conversation reuses turns 1..N-1), else the idle slot used longest ago (``_slot_for``); it copies
another slot's cache when that shares a longer prefix (``llama_memory_seq_cp``, then the
tail is trimmed: two clients with one long system prompt evaluate it once). Requests beyond the
slots wait in arrival order. ``cached_tokens`` in usage says how many prompt tokens were reused.

With a prompt cache on disk (``kvstate.py``), a slot's state is saved when its reply ends (after the
reply's last event is sent), and a prompt that shares a longer prefix with a saved state than with
any slot has that state loaded instead of evaluated; ``restored_tokens`` in usage counts those.

Speculative decoding (``drafts.py``): a generating slot may put, after its next token, a draft of the
tokens guessed to follow (from the request's ``prediction``, its own prompt and reply, or a draft
model, ``draftmodel.py``), each with
logits; its rows are sampled in order while each sample equals the drafted token, and the rest of the
draft leaves the slot's cache (``llama_memory_seq_rm``) before the next step.

Seeds: each request has its own seeded sampler chain, and each slot its own KV stream whose cells
stay in position order. With flash attention on a quantized KV cache (the planner's default on the
CPU, ``kv_for``) llama.cpp computes each token's row the same way whatever shares its step, however the
prompt was chunked and on any thread count, so a greedy or seeded reply is the same alone, batched,
drafted, cached or restored (tests/server/test_same_reply.py). What still changes it: an f16 cache
(prompt chunks of 64+ tokens take a tiled attention kernel, a lone stream's token at 512+ cells has
its cache split between the threads), flash attention off (attention then sums over every cell of
the stream and its rounding depends on how many there are), or a GPU backend (its kernels pick
different reductions by batch size).

Runs entirely on the runner's worker thread, the only thread that touches the ``Llama``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import kvstate, vision
from .decode import Reply, common_prefix
from .drafts import Drafter
from .kvstreams import slot_context
from .sampler import Chain, DeadEnd, token_logprob
from .threads import StepThreads
from .tokens import prompt_tokens

Send = Callable[..., None]  # send(req_id, kind, **data)
SIMILAR = 0.5  # a slot whose cache covers this share of a prompt is that conversation's (llama-server's rule)
MIN_COPY = 64  # copying a slot's stream moves all of it: worth it only for a prefix of this many tokens
MIN_RESTORE = 32  # reading a saved state from disk beats evaluating from about this many tokens on


@dataclass
class _Seq:
    """One request: its prompt, sampler chain and reply."""

    req_id: str
    cancel: threading.Event
    prompt: list[int]
    chain: Chain | None
    reply: Reply
    n_logprobs: int | None
    next_token: int | None = None  # sampled, not yet in the cache
    tag: str | None = None  # what the prompt cache files this request's state under (a conversation)
    images: list = field(default_factory=list)  # its image chunks (vision.py), by their place in ``prompt``
    extra_cells: int = 0  # KV cells its images fill beyond their places in ``prompt`` (M-RoPE's; vision.py)
    drafter: Drafter | None = None  # guesses at the next tokens (drafts.py); None: no drafting
    draft: list[int] = field(default_factory=list)  # this step's draft, after next_token in the batch


@dataclass
class _Slot:
    """One sequence id of the context and the tokens its KV cache holds, in order."""

    seq_id: int
    tokens: list[int] = field(default_factory=list)
    seq: _Seq | None = None
    used_at: float = 0.0  # when its last request ended (0: never used)
    prompt_n: int = 0  # its last request's prompt length: a prompt keeping that much continues its conversation


class BatchEngine:
    projector: Any = None  # vision.Projector, when the model was loaded with one (the runner sets it)
    draft_model: Any = None  # draftmodel.DraftModel, when the model was loaded with one (the runner sets it)

    def __init__(self, llama: Any, n_slots: int, send: Send, on_finished: Callable[[str], None],
                 cache: kvstate.PromptCache | None = None, threads: StepThreads | None = None,
                 drafting: bool = True):
        import llama_cpp as lc

        self.llama, self.send, self.on_finished, self.cache = llama, send, on_finished, cache
        self.threads = threads  # times each step and sets its thread counts (threads.py); None: the load's
        self.drafting = drafting  # prompt-lookup drafts (a request's prediction drafts either way)
        self.ctx = llama._ctx.ctx
        self.mem = lc.llama_get_memory(self.ctx)
        lc.llama_memory_clear(self.mem, True)  # whatever ran before (a warm-up) is not a slot's
        self.n_ctx = slot_context(llama)
        self.n_batch = lc.llama_n_batch(self.ctx)
        self.slots = [_Slot(i) for i in range(max(1, n_slots))]
        self.waiting: deque[_Seq] = deque()
        self.batch = lc.llama_batch_init(self.n_batch, 0, 1)

    @property
    def busy(self) -> bool:
        return bool(self.waiting) or any(s.seq for s in self.slots)

    @property
    def full(self) -> bool:
        """Every slot is (or is about to be) taken: a request arriving now would wait."""
        return len(self.waiting) + sum(1 for s in self.slots if s.seq) >= len(self.slots)

    def submit(self, req_id: str, msg: dict, cancel: threading.Event) -> None:
        """Queue a ``generate`` request; its replies go out through ``send`` as steps run."""
        started = time.perf_counter() - msg.get("tokenize_s", 0.0)
        tokens = msg.get("tokens")  # the runner's tokenizer thread tokenized it, off this thread
        if tokens is None:
            tokens = prompt_tokens(self.llama, msg["prompt"], msg.get("add_bos", False))
        if not tokens:
            self._finish_early(req_id, "error", error="ValueError", message="the prompt is empty")
            return
        images = msg.pop("images", [])
        n = len(tokens) + vision.extra_cells(images)  # what the prompt fills of the slot's context
        if n >= self.n_ctx:
            vision.free(images)
            self._finish_early(req_id, "error", error="ContextOverflow", prompt_tokens=n, context=self.n_ctx,
                               message=f"the prompt is {n:,} tokens but the context holds {self.n_ctx:,}")
            return
        s = msg["sampling"]
        try:
            chain = Chain(self.llama, s, msg.get("grammar"))
        except ValueError as exc:
            vision.free(images)
            self._finish_early(req_id, "error", error="GrammarError", message=str(exc))
            return
        reply = Reply(self.llama, s, n, started, self.n_ctx)
        prediction, off = msg.get("prediction_tokens"), msg.get("drafts") is False  # off: no drafting at all
        reply.predicted = prediction is not None
        lookup = not off and msg.get("drafts", self.drafting) is not False
        modelled = not off and self.draft_model is not None and not images
        drafter = Drafter(tokens, prediction, lookup) if not off and (prediction or lookup or modelled) else None
        if modelled:
            drafter.model = lambda k: self._guess(drafter, k)
        self.waiting.append(_Seq(req_id, cancel, tokens, chain, reply, getattr(s, "logprobs", None),
                                 tag=msg.get("cache_tag"), images=images, extra_cells=n - len(tokens),
                                 drafter=drafter))

    def _guess(self, drafter: Drafter, k: int) -> list[int]:
        """The draft model's next ``k`` tokens for the slot ``drafter``'s request is in."""
        slot = next(s for s in self.slots if s.seq is not None and s.seq.drafter is drafter)
        return self.draft_model.guess(slot.seq_id, slot.tokens + [slot.seq.next_token], k)

    def _finish_early(self, req_id: str, kind: str, **data: Any) -> None:
        self.send(req_id, kind, **data)
        self.on_finished(req_id)

    # --- one step ----------------------------------------------------------------------------------
    def step(self) -> None:
        """Admit waiting requests, drop cancelled ones, then decode one batch and sample from it."""
        self._drop_cancelled()
        self._admit()
        if self.projector is not None:
            vision.evaluate_due(self)  # images the prompts have reached, each in a decode of its own
        outputs = self._fill()
        if self.batch.n_tokens == 0:
            return
        if not self._decode():
            return
        for seq, idx in outputs:
            self._sample(seq, idx)

    def _drop_cancelled(self) -> None:
        for seq in [s for s in self.waiting if s.cancel.is_set()]:
            self.waiting.remove(seq)
            self._end(seq, seq.reply.end("cancelled"))
        for slot in self.slots:
            if slot.seq and slot.seq.cancel.is_set():
                self._release(slot, slot.seq.reply.end("cancelled"))

    def _admit(self) -> None:
        while self.waiting:
            idle = [s for s in self.slots if s.seq is None]
            if not idle:
                return
            seq = self.waiting.popleft()
            slot = self._slot_for(seq.prompt, idle)
            self._reuse(slot, seq)
            slot.seq, slot.prompt_n = seq, len(seq.prompt)

    @staticmethod
    def _slot_for(prompt: list[int], idle: list[_Slot]) -> _Slot:
        """The idle slot a prompt overwrites: the one holding its conversation, else the least recently
        used (an empty one first).

        A slot holds the prompt's conversation when the prompt keeps everything the slot's last prompt
        was (this is its next turn, or the same turn again) and that covers ``SIMILAR`` of it. Sharing a
        long system prompt is not enough: a new conversation's prompt is mostly its system prompt, so by
        llama-server's share rule alone it matched every slot holding that system prompt and took the
        first of them (slot 0, by a tie-break), which could be the conversation being had. The shared
        prefix is copied from that slot instead (``_reuse``), and the slot itself is left to its own."""
        owners = [s for s in idle if s.tokens and (n := common_prefix(s.tokens, prompt)) >= s.prompt_n
                  and n >= SIMILAR * len(prompt)]
        if owners:  # the longest shared prefix; between equals, the one used longest ago
            return max(owners, key=lambda s: (common_prefix(s.tokens, prompt), -s.used_at))
        return min(idle, key=lambda s: s.used_at)

    def _reuse(self, slot: _Slot, seq: _Seq) -> None:
        """Keep the longest prefix of the prompt this slot (or, copied, another slot) already holds."""
        import llama_cpp as lc

        keep = common_prefix(slot.tokens, seq.prompt)
        donor = max((s for s in self.slots if s is not slot), key=lambda s: common_prefix(s.tokens, seq.prompt),
                    default=None)
        if donor is not None and common_prefix(donor.tokens, seq.prompt) > max(keep, MIN_COPY - 1):
            keep = common_prefix(donor.tokens, seq.prompt)
            lc.llama_memory_seq_rm(self.mem, slot.seq_id, -1, -1)
            lc.llama_memory_seq_cp(self.mem, donor.seq_id, slot.seq_id, -1, -1)  # streams copy whole
            slot.tokens = list(donor.tokens)
        restored = self._restore(slot, seq, keep)
        keep = min(max(keep, restored), len(seq.prompt) - 1)  # the last prompt token is evaluated again for its logits
        keep = vision.whole_images(seq.images, keep)
        lc.llama_memory_seq_rm(self.mem, slot.seq_id, keep, -1)
        slot.tokens = slot.tokens[:keep]
        seq.reply.cached = keep + vision.extra_cells(seq.images, keep)  # in tokens, an image's embeddings each
        seq.reply.restored = seq.reply.cached if restored else 0

    def _restore(self, slot: _Slot, seq: _Seq, keep: int) -> int:
        """Load the saved state sharing the longest prefix with the prompt into ``slot`` when that beats
        the ``keep`` tokens the slots hold; returns the prefix it covers (0: nothing loaded)."""
        import llama_cpp as lc

        if self.cache is None or keep >= len(seq.prompt) - 1:
            return 0
        hit = self.cache.lookup(seq.prompt)
        if hit is None or hit[1] < keep + MIN_RESTORE:
            return 0
        entry, n = hit
        started = time.perf_counter()
        data = self.cache.read(entry)  # checked against its checksum; None when refused
        if data is None:
            return 0
        read_s = time.perf_counter() - started
        lc.llama_memory_seq_rm(self.mem, slot.seq_id, -1, -1)
        if not kvstate.restore(self.ctx, slot.seq_id, data):
            lc.llama_memory_seq_rm(self.mem, slot.seq_id, -1, -1)  # whatever half of it went in
            slot.tokens = []
            self.cache.forget(entry)
            return 0
        slot.tokens = entry.tokens
        print(f"fireside: restored {min(n, len(seq.prompt) - 1):,} of {len(seq.prompt):,} prompt tokens from the prompt cache "
              f"({len(data) / 2**20:.1f} MiB read and checked in {read_s * 1000:.0f} ms, loaded in "
              f"{(time.perf_counter() - started - read_s) * 1000:.0f} ms)", file=sys.stderr, flush=True)
        return n

    def _fill(self) -> list[tuple[_Seq, int]]:
        """Put this step's tokens in the batch; return which sequence samples from which output row.

        A slot is either generating (one token) or evaluating its prompt (a chunk), never both, so
        each token's position is the slot's cached length plus its place in the chunk."""
        self.batch.n_tokens = 0
        outputs = []
        generating = [s for s in self.slots if s.seq is not None and s.seq.next_token is not None]
        for n, slot in enumerate(generating, 1):
            seq, pos = slot.seq, len(slot.tokens)
            outputs.append((seq, self._add(slot.seq_id, seq.next_token, pos, True)))
            # a draft leaves a token of the batch for each slot still to come, stays in the slot's
            # context and within the reply's max tokens (drafts.py)
            room = min(self.n_batch - self.batch.n_tokens - (len(generating) - n),
                       self.n_ctx - pos - seq.extra_cells - 2,
                       seq.reply.max_tokens - seq.reply.n_out - 1)
            seq.draft = seq.drafter.propose(room) if seq.drafter else []
            for i, token in enumerate(seq.draft, 1):
                self._add(slot.seq_id, token, pos + i, True)
        for slot in self.slots:  # prefill: the rest of the batch, in slot order
            seq = slot.seq
            if seq is None or seq.next_token is not None:
                continue
            start = len(slot.tokens)
            end = vision.text_end(seq.images, start, min(len(seq.prompt), start + self.n_batch - self.batch.n_tokens))
            for pos in range(start, end):
                last = pos == len(seq.prompt) - 1
                idx = self._add(slot.seq_id, seq.prompt[pos], pos, last)
                if last:
                    outputs.append((seq, idx))
        return outputs

    def _add(self, seq_id: int, token: int, pos: int, logits: bool) -> int:
        b = self.batch
        i = b.n_tokens
        b.token[i] = token
        b.pos[i] = pos
        b.n_seq_id[i] = 1
        b.seq_id[i][0] = seq_id
        b.logits[i] = logits
        b.n_tokens = i + 1
        return i

    def _decode(self) -> bool:
        """Run the batch; returns whether there is something to sample. Max tokens keep each reply
        within its slot's context, so a full cache (1) is a surprise: the longest reply ends."""
        import llama_cpp as lc

        if self.threads is None:
            rc = lc.llama_decode(self.ctx, self.batch)
        else:  # a step with prompt tokens in it evaluates a prompt; else every token is a stream's next, or drafted
            generating = sum(1 + len(s.seq.draft) for s in self.slots if s.seq is not None and s.seq.next_token is not None)
            rc = self.threads.run(self.batch, prefill=self.batch.n_tokens > generating)
        if rc == 1:
            longest = max((s for s in self.slots if s.seq), key=lambda s: len(s.tokens))
            self._release(longest, longest.seq.reply.end("length"))
            return False
        if rc != 0:
            self.fail_all(f"llama_decode failed ({rc})")
            return False
        self._commit()
        return True

    def _commit(self) -> None:
        """The batch's tokens are in the cache now: record them as their slots' tokens."""
        b = self.batch
        by_seq = {s.seq_id: s for s in self.slots}
        for i in range(b.n_tokens):
            by_seq[b.seq_id[i][0]].tokens.append(b.token[i])

    def _sample(self, seq: _Seq, idx: int) -> None:
        """Sample ``seq``'s row ``idx`` and, with a draft, the rows after it while each sample equals
        the drafted token in the batch (the rule drafts.py explains); the rest of the draft is dropped."""
        import llama_cpp as lc

        slot = next(s for s in self.slots if s.seq is seq)
        draft, seq.draft = seq.draft, []
        accepted, events = 0, None
        seq.reply.drafted += len(draft)  # counted before a token ends the reply: its usage says them
        for i in range(len(draft) + 1):
            try:
                token = seq.chain.sample(self.ctx, idx + i)
            except DeadEnd as exc:  # this request ends; the step goes on for the others
                events = [dead_end(seq.reply, str(exc))]
                break
            logprob = None
            if seq.n_logprobs is not None:
                logprob = token_logprob(self.llama, self.ctx, idx + i, token, seq.n_logprobs)
            hit = i < len(draft) and token == draft[i]
            accepted += hit
            seq.reply.accepted += hit
            events = seq.reply.push(token, lc.llama_vocab_is_eog(self.llama._model.vocab, token), logprob)
            seq.next_token = token
            if seq.drafter:
                seq.drafter.took(token)
            if seq.reply.finish is not None or not hit:
                break
            for event in events:  # a draft token taken: its text goes out, the next row is sampled
                self.send(seq.req_id, event.pop("type"), **event)
            events = []
        if draft:
            self._drop_draft(slot, len(draft) - accepted, seq.drafter, len(draft), accepted)
        if seq.reply.finish is not None or (events and events[-1]["type"] == "error"):
            self._release(slot, events)
        else:
            for event in events:
                self.send(seq.req_id, event.pop("type"), **event)

    def _drop_draft(self, slot: _Slot, rejected: int, drafter: Drafter, drafted: int, accepted: int) -> None:
        """The draft's last ``rejected`` tokens leave the slot's cache; a taken one stays (it is the reply's)."""
        import llama_cpp as lc

        drafter.verified(drafted, accepted)
        if rejected:
            del slot.tokens[len(slot.tokens) - rejected:]
            lc.llama_memory_seq_rm(self.mem, slot.seq_id, len(slot.tokens), -1)

    # --- endings -----------------------------------------------------------------------------------
    def _release(self, slot: _Slot, events: list[dict] | None, error: str = "") -> None:
        """End the slot's request; the slot keeps its tokens for the next request to reuse."""
        seq, slot.seq, slot.used_at = slot.seq, None, time.monotonic()
        if events is None:
            events = [{"type": "error", "error": "RuntimeError", "message": error}]
        self._end(seq, events)
        if not error:
            self._save(slot, seq.tag)

    def _save(self, slot: _Slot, tag: str | None) -> None:
        """Hand the prompt cache a copy of the slot's state; its writer thread does the rest."""
        if self.cache is None or not self.cache.wants(slot.tokens):
            return
        state = kvstate.snapshot(self.ctx, slot.seq_id)
        if state is not None:
            self.cache.save(slot.tokens, state, tag)

    def _end(self, seq: _Seq, events: list[dict]) -> None:
        if seq.chain:
            seq.chain.free()
        vision.free(seq.images)
        for event in events:
            self.send(seq.req_id, event.pop("type"), **event)
        self.on_finished(seq.req_id)

    def fail_all(self, message: str) -> None:
        """A step raised: every request in flight gets the error; the slots' caches are forgotten."""
        import llama_cpp as lc

        for slot in self.slots:
            if slot.seq:
                self._release(slot, None, error=message)
        while self.waiting:
            seq = self.waiting.popleft()
            self._end(seq, [{"type": "error", "error": "RuntimeError", "message": message}])
        lc.llama_memory_clear(self.mem, True)
        for slot in self.slots:
            slot.tokens = []
        if self.draft_model is not None:
            self.draft_model.forget()

    def close(self) -> None:
        import llama_cpp as lc

        lc.llama_batch_free(self.batch)


def dead_end(reply: Reply, why: str) -> dict:
    """The error event for a request whose grammar allows no next token (``grammar_dead_end``): where
    in the reply it stopped, in tokens and in characters of text produced."""
    position = reply.n_out
    return {"type": "error", "error": "GrammarDeadEnd", "position": position, "chars": reply.chars,
            "message": f"grammar_dead_end: the grammar allows no next token at position {position} of the reply "
                       f"(after {reply.chars:,} characters): {why}"}
