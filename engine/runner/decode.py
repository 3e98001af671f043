"""One reply's output side: detokenize sampled tokens, honour stop strings and max tokens, report usage.

Runs on the runner's worker thread, one ``Reply`` per request in a slot (``batch.py`` samples the
tokens). ``push`` turns each sampled token into event dicts (``text`` pieces, then one ``done`` with
usage and the stop reason) that the runner sends to the parent. Stop strings are honoured across
token boundaries: text that could be the start of a stop string is held back until it is decided,
so a stop string never reaches the user.
"""

from __future__ import annotations

import codecs
import time
from typing import Any

from .tokens import piece as token_piece


def common_prefix(a: list[int], b: list[int]) -> int:
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


class Reply:
    """What one request has produced so far. ``finish`` is set once the reply is over."""

    def __init__(self, llama: Any, sampling: Any, n_prompt: int, started: float, n_ctx: int):
        self.llama, self.n_prompt, self.started = llama, n_prompt, started
        room = n_ctx - n_prompt
        self.max_tokens = min(sampling.max_tokens, room) if sampling.max_tokens else room
        self.stops = [x for x in sampling.stop if x]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.held, self.n_out, self.cached, self.restored = "", 0, 0, 0
        self.chars = 0  # characters of text produced so far (where a grammar dead end is reported)
        self.unsent = 0  # tokens whose text has not gone out in a text event yet
        self.first_at: float | None = None
        self.finish: str | None = None
        self.logprobs: list = []  # TokenLogprob entries not yet sent with a text piece
        self.drafted = self.accepted = 0  # drafted tokens verified, and taken (runner/drafts.py)
        self.predicted = False  # the request sent a prediction (OpenAI's Predicted Outputs)

    def push(self, token: int, is_eog: bool, logprob: Any = None) -> list[dict]:
        """Take one sampled token; return the events it releases (a ``done`` when the reply ends)."""
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if is_eog:
            return self.end("stop")
        self.n_out += 1
        self.unsent += 1
        if logprob is not None:
            self.logprobs.append(logprob)
        piece = self.decoder.decode(token_piece(self.llama, token))
        self.chars += len(piece)
        self.held += piece
        hits = [(self.held.find(x), x) for x in self.stops if x in self.held]
        if hits:
            at, matched = min(hits)
            self.held = self.held[:at]
            return self.end("stop", matched)
        events = []
        keep = _held_suffix(self.held, self.stops)
        if len(self.held) > keep:
            events.append(self._text(self.held[: len(self.held) - keep]))
            self.held = self.held[len(self.held) - keep:]
        if self.n_out >= self.max_tokens:
            events += self.end("length")
        return events

    def _text(self, text: str) -> dict:
        event = {"type": "text", "text": text, "tokens": self.unsent}
        self.unsent = 0
        if self.logprobs:
            event["logprobs"], self.logprobs = self.logprobs, []
        return event

    def end(self, finish: str, stop_sequence: str | None = None) -> list[dict]:
        """Finish the reply (``stop``, ``length`` or ``cancelled``): flush held text, then ``done``, which
        names the stop string that ended it, if one did (Anthropic's ``stop_sequence``)."""
        self.finish = finish
        self.held += self.decoder.decode(b"", final=True)
        events = [self._text(self.held)] if self.held or self.logprobs else []
        self.held = ""
        done = {"type": "done", "finish_reason": finish, "usage": self.usage()}
        if stop_sequence is not None:
            done["stop_sequence"] = stop_sequence
        return [*events, done]

    def usage(self) -> dict:
        from ..types import Usage

        end = time.perf_counter()
        first_at = self.first_at or end
        ttft, decode_s, n_out = first_at - self.started, end - first_at, self.n_out
        return Usage(
            prompt_tokens=self.n_prompt,
            completion_tokens=n_out,
            cached_tokens=self.cached,
            restored_tokens=self.restored,
            ttft_s=ttft,
            decode_tokens_per_s=(n_out - 1) / decode_s if n_out > 1 and decode_s > 0 else 0.0,
            prompt_tokens_per_s=(self.n_prompt - self.cached) / ttft if ttft > 0 else 0.0,
            total_s=end - self.started,
            draft_tokens=self.drafted,
            accepted_draft_tokens=self.accepted,
            accepted_prediction_tokens=self.accepted if self.predicted else 0,
            rejected_prediction_tokens=self.drafted - self.accepted if self.predicted else 0,
        ).to_dict()
