"""Speculative decoding's drafts: guesses at a reply's next tokens, which the batch engine verifies in the
same ``llama_decode`` step as every other slot's tokens.

A generating slot normally puts one token in a step; with a draft it puts that token and the ``k``
tokens guessed to follow it, with logits for each. The step's rows are then sampled in order, each
with the request's own sampler chain, and a drafted token is kept while it equals what its row
samples (``batch.py``). Drafts here are point guesses, so that check is the standard speculative
sampling rule (accept a draft with the target's probability of it, else sample from what is left):
sampling the row and comparing accepts ``d`` with probability p(d), and a differing sample is drawn
from p without ``d``, renormalized. The chain samples exactly the tokens of the reply, in order, so a
seeded request draws the same random numbers and gives the same text with drafting on or off; greedy
text is the same token for token wherever a step's numerics are (see ``batch.py`` on batches).

Three sources, per request, tried in this order:

- **the prediction** (OpenAI's Predicted Outputs: the text the reply is expected to repeat, such as a
  file being edited): drafts follow the prediction from where the reply is in it; after the reply
  leaves it (an edit), the last ``NGRAM`` tokens are looked up in it again to find where it resumes;
- **prompt lookup** (llama.cpp's ngram-simple): the last ``NGRAM`` tokens of the prompt and reply so
  far are looked up earlier in them, and what followed there is the draft (a quoted passage, code
  being repeated);
- **a draft model** (``draftmodel.py``, llama.cpp's draft-simple): a second model with the same
  vocabulary guesses, greedily, when neither source above has a draft.

Each draft costs the step its tokens, and a step shared by several slots costs every slot, so drafting
must pay: its length adapts (doubling while drafts are taken whole, cut to what was taken when one is
not), and a prompt-lookup or draft-model source whose drafts are mostly refused (under ``PAYS`` of the drafted tokens
over the last ``WINDOW``) is paused for a number of steps that doubles each time, so free writing,
where lookups rarely hit, is decoded as it would be without drafting.

Runs on the runner's worker thread, one ``Drafter`` per request.
"""

from __future__ import annotations

from collections.abc import Callable

NGRAM = 3  # tokens of context a lookup matches (2 hits too often by chance in prose; 4 misses edits' seams)
MIN_DRAFT, MAX_DRAFT = 2, 8  # tokens a prompt-lookup draft starts at and grows to
MODEL_DRAFT = 4  # tokens a draft model's guess starts at (it grows to MAX_DRAFT the same way)
MAX_PREDICTION_DRAFT = 16  # a prediction is usually right for long runs
NEARBY = 24  # prediction tokens searched past the reply's last place in it, for where an edit ends
WINDOW = 16  # drafted tokens over which a source's acceptance is judged
PAYS = 0.35  # the share of drafted tokens accepted below which prompt lookup is paused
PAUSE, MAX_PAUSE = 16, 512  # steps a paused source waits, doubling each time it pays too little


class Lookup:
    """Positions of each ``NGRAM``-token run of a growing token list (the token after each run)."""

    def __init__(self, tokens: list[int] | None = None, every: bool = False):
        self.tokens: list[int] = []
        self.every = every  # keep every position of a run (a prediction), or only the latest (history)
        self.at: dict[tuple[int, ...], list[int]] = {}
        for token in tokens or []:
            self.append(token)

    def append(self, token: int) -> None:
        self.tokens.append(token)
        n = len(self.tokens) - 1  # the new token's index: the run just before it is followed by it
        if n >= NGRAM:
            key = tuple(self.tokens[n - NGRAM:n])
            if self.every:
                self.at.setdefault(key, []).append(n)
            else:
                self.at[key] = [n]

    def after(self, tail: list[int], near: int = 0) -> int | None:
        """Where the tokens following an earlier run equal to ``tail`` start: the first such place at or
        after ``near`` (else the last before it); None if ``tail`` occurs nowhere."""
        found = self.at.get(tuple(tail))
        if not found:
            return None
        return next((p for p in found if p >= near), found[-1])


class Source:
    """One draft source's acceptance record and its current draft length."""

    def __init__(self, k: int, k_max: int, pauses: bool):
        self.k, self.k_max, self.pauses = k, k_max, pauses
        self.recent_drafted = self.recent_accepted = 0
        self.paused_for, self.next_pause = 0, PAUSE

    def verified(self, drafted: int, accepted: int) -> None:
        self.k = min(self.k * 2, self.k_max) if accepted == drafted else max(MIN_DRAFT, accepted + 1)
        self.recent_drafted += drafted
        self.recent_accepted += accepted
        if self.recent_drafted < WINDOW:
            return
        if self.pauses and self.recent_accepted < PAYS * self.recent_drafted:
            self.paused_for, self.next_pause = self.next_pause, min(self.next_pause * 2, MAX_PAUSE)
        elif self.recent_accepted >= PAYS * self.recent_drafted:
            self.next_pause = PAUSE
        self.recent_drafted = self.recent_accepted = 0

    def ready(self) -> bool:
        if self.paused_for > 0:
            self.paused_for -= 1
            return False
        return True


class Drafter:
    """One request's drafts: from its ``prediction`` tokens, if it sent any, from prompt lookup over
    ``prompt`` and the reply (``lookup``: whether prompt lookup is on), and from a draft model once the
    batch engine gives it one (``model``: ``guess(k)``, the slot's next ``k`` tokens as it expects them)."""

    def __init__(self, prompt: list[int], prediction: list[int] | None, lookup: bool = True):
        self.model: Callable[[int], list[int]] | None = None
        self.model_source = Source(MODEL_DRAFT, MAX_DRAFT, pauses=True)
        self.history = Lookup(prompt) if lookup else None
        self.prediction = Lookup(prediction, every=True) if prediction else None
        self.pred_at: int | None = 0 if prediction else None  # the prediction's next token, while on its track
        self.pred_good = 0  # where the reply last was on the prediction's track
        self.pred_source = Source(MAX_PREDICTION_DRAFT, MAX_PREDICTION_DRAFT, pauses=False)
        self.lookup_source = Source(MIN_DRAFT, MAX_DRAFT, pauses=True)
        self.output: list[int] = []  # the reply's tokens, for when prompt lookup is off
        self.last: Source | None = None  # the source of the draft being verified
        self.drafted = self.accepted = 0

    def took(self, token: int) -> None:
        """``token`` is the reply's next token (sampled or accepted)."""
        self.output.append(token)
        if self.history is not None:
            self.history.append(token)
        if self.pred_at is not None:
            ok = self.pred_at < len(self.prediction.tokens) and self.prediction.tokens[self.pred_at] == token
            self.pred_at = self.pred_at + 1 if ok else None
            self.pred_good = self.pred_at if ok else self.pred_good

    def propose(self, room: int) -> list[int]:
        """Up to ``room`` tokens guessed to follow the reply so far (empty: no draft this step)."""
        self.last = None
        if room <= 0:
            return []
        draft = self._from_prediction(room)
        if draft:
            self.last = self.pred_source
            return draft
        if self.history is not None and self.lookup_source.ready():
            tokens = self.history.tokens
            at = self.history.after(tokens[-NGRAM:]) if len(tokens) > NGRAM else None
            if at is not None:
                self.last = self.lookup_source
                return tokens[at:at + min(room, self.lookup_source.k)]
        if self.model is not None and self.model_source.ready():
            draft = self.model(min(room, self.model_source.k))
            if draft:
                self.last = self.model_source
            return draft
        return []

    def _from_prediction(self, room: int) -> list[int]:
        if self.prediction is None:
            return []
        tokens = self.prediction.tokens
        if self.pred_at is None and self.output:  # off its track: find where it resumes
            self.pred_at = self._resume()
        if self.pred_at is None:
            return []
        return tokens[self.pred_at:self.pred_at + min(room, self.pred_source.k)]

    def _resume(self) -> int | None:
        """Where the prediction goes on after the reply left it: just after the reply's last token, looked
        for a little way past where the reply last followed it (a word replaced, a line left out), else
        after the reply's last ``NGRAM`` tokens anywhere in it (a passage moved)."""
        tokens, last = self.prediction.tokens, self.output[-1]
        for at in range(self.pred_good, min(len(tokens), self.pred_good + NEARBY)):
            if tokens[at] == last:
                return at + 1
        return self.prediction.after(self.output[-NGRAM:], self.pred_good) if len(self.output) >= NGRAM else None

    def verified(self, drafted: int, accepted: int) -> None:
        """The last draft's first ``accepted`` of ``drafted`` tokens were kept."""
        if self.last is not None and drafted:
            self.last.verified(drafted, accepted)
            self.drafted += drafted
            self.accepted += accepted
        self.last = None
