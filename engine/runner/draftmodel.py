"""A draft model: a second model with the same vocabulary, loaded beside the first in the runner, whose
greedy guesses at a slot's next tokens are one of the draft sources ``drafts.py`` describes (the batch
engine verifies them in its next step, so what the reply says is the model's own either way).

Its context has a sequence per slot of the model's, each holding the tokens it last evaluated for that
slot; a guess first brings that sequence level with the slot (the tokens it lacks, evaluated in one
batch; a rejected draft's tail dropped), then decodes one token at a time, each the argmax of the last.
It is used only where its vocabulary is the model's token for token (``vocabulary_difference``): any
other pairing would draft token ids that mean something else.

Runs on the runner's worker thread, beside the ``BatchEngine`` that calls it.
"""

from __future__ import annotations

from typing import Any

from .decode import common_prefix
from .sampler import logits_row


def vocabulary_difference(model: Any, draft: Any) -> str | None:
    """Why ``draft`` cannot draft for ``model`` (both ``llama_cpp.Llama``), in words; None when their
    vocabularies are the same: the same size, the same text and kind for every token, the same
    special tokens and the same BOS/EOS handling."""
    import llama_cpp as lc

    mv, dv = model._model.vocab, draft._model.vocab
    n, m = lc.llama_vocab_n_tokens(mv), lc.llama_vocab_n_tokens(dv)
    if n != m:
        return f"their vocabularies differ in size ({n:,} tokens and {m:,})"
    for name, read in (("beginning-of-text (BOS)", lc.llama_vocab_bos), ("end-of-text (EOS)", lc.llama_vocab_eos),
                       ("end-of-turn (EOT)", lc.llama_vocab_eot), ("padding", lc.llama_vocab_pad)):
        if read(mv) != read(dv):
            return f"their {name} tokens differ (token {read(mv)} and token {read(dv)})"
    for name, read in (("adds a BOS token", lc.llama_vocab_get_add_bos), ("adds an EOS token", lc.llama_vocab_get_add_eos)):
        if bool(read(mv)) != bool(read(dv)):
            return f"one {name} to every prompt and the other does not"
    for token in range(n):
        a, b = lc.llama_vocab_get_text(mv, token), lc.llama_vocab_get_text(dv, token)
        if a != b:
            return (f"token {token:,} is {a.decode('utf-8', 'replace')!r} in one and "
                    f"{b.decode('utf-8', 'replace')!r} in the other")
        if lc.llama_vocab_get_attr(mv, token) != lc.llama_vocab_get_attr(dv, token):
            return f"token {token:,} ({a.decode('utf-8', 'replace')!r}) is a special token in one and not in the other"
    return None


class DraftModel:
    """The draft model's context (``llama``, loaded with as many sequences and as long a context per
    sequence as the model's) and what each of its sequences holds."""

    def __init__(self, llama: Any, name: str):
        import llama_cpp as lc

        self.llama, self.name = llama, name
        self.ctx = llama._ctx.ctx
        self.mem = lc.llama_get_memory(self.ctx)
        lc.llama_memory_clear(self.mem, True)
        self.n_batch = lc.llama_n_batch(self.ctx)
        self.n_vocab = lc.llama_vocab_n_tokens(llama._model.vocab)
        self.batch = lc.llama_batch_init(self.n_batch, 0, 1)
        self.held: dict[int, list[int]] = {}  # sequence id -> the tokens its cache holds

    def guess(self, seq_id: int, context: list[int], k: int) -> list[int]:
        """Up to ``k`` tokens the draft model expects after ``context`` (a slot's tokens and its next
        one), greedily; fewer when it expects the text to end or llama.cpp refuses a step."""
        import llama_cpp as lc

        held = self.held.get(seq_id, [])
        keep = min(common_prefix(held, context), len(context) - 1)  # the last one again, for its logits
        lc.llama_memory_seq_rm(self.mem, seq_id, keep, -1)
        self.held[seq_id] = held = context[:keep]
        for start in range(keep, len(context), self.n_batch):
            chunk = context[start:start + self.n_batch]
            if not self._decode(seq_id, chunk, start, held):
                return []
        vocab, draft = self.llama._model.vocab, []
        while len(draft) < k:
            token = int(logits_row(self.ctx, -1, self.n_vocab).argmax())
            draft.append(token)
            if lc.llama_vocab_is_eog(vocab, token) or len(draft) == k:
                break
            if not self._decode(seq_id, [token], len(held), held):
                break
        return draft

    def _decode(self, seq_id: int, tokens: list[int], pos: int, held: list[int]) -> bool:
        """Evaluate ``tokens`` at ``pos`` on in sequence ``seq_id`` (logits for the last); they join
        ``held`` when llama.cpp took them."""
        import llama_cpp as lc

        b = self.batch
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos + i, 1, i == len(tokens) - 1
            b.seq_id[i][0] = seq_id
        b.n_tokens = len(tokens)
        if lc.llama_decode(self.ctx, b) != 0:
            lc.llama_memory_seq_rm(self.mem, seq_id, len(held), -1)
            return False
        held.extend(tokens)
        return True

    def forget(self) -> None:
        """The model's slots were cleared (a failed step): so are these sequences."""
        import llama_cpp as lc

        lc.llama_memory_clear(self.mem, True)
        self.held.clear()

    def close(self) -> None:
        import llama_cpp as lc

        lc.llama_batch_free(self.batch)
