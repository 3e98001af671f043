"""Numbered sources for the API's ``file_search``: the prompt that hands a model retrieved passages as
``[1]``, ``[2]``... and asks it to cite them (worded as the app's chats word it, ``grounding.py``), and
``CitationCutter``, which takes the ``[n]`` markers out of a reply as it streams and
says where each stood, so a client can place a citation there (OpenAI's ``file_citation`` annotations).

A marker is ``[n]``, ``[n, m]`` or several in a row (``[1][2]``), with ``n`` one of the sources given;
any other bracket (``[0]``, ``[7]`` with three sources, ``[x]``) is text and stays. One space before a
marker goes with it, so "the lens [1]." reads "the lens.".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from .grounding import question_with_sources

_MARKER = re.compile(r" ?\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
_OPEN_TAIL = re.compile(r" ?\[[\d,\s]{0,24}$| $")  # what may still become a marker when more text comes


class Source(Protocol):
    filename: str
    text: str
    heading: str
    page: int | None


def grounded_prompt(question: str, sources: Sequence[Source]) -> str:
    """The user's question with the sources above it, numbered from 1, and the ask to cite them: the same
    words the app's chats use (``grounding.question_with_sources``)."""
    if not sources:
        return question
    return question_with_sources(question, [{"n": n, "file": s.filename, "page": s.page, "heading": s.heading,
                                             "text": s.text} for n, s in enumerate(sources, 1)])


class CitationCutter:
    """Feeds a reply's text through, with the markers cut out: ``feed(text)`` returns the clean text that
    can be sent now (a possible marker's start is held back until it is whole or cannot be one), ``end()``
    the rest. ``citations`` lists ``(n, index)``: source ``n`` cited at ``index`` of the clean text."""

    def __init__(self, count: int):
        self.count = count
        self.citations: list[tuple[int, int]] = []
        self._held = ""
        self._sent = 0  # characters of clean text given out so far

    def feed(self, text: str) -> str:
        buffer, pos, out = self._held + text, 0, []
        for m in _MARKER.finditer(buffer):
            numbers = [int(n) for n in re.split(r"\s*,\s*", m.group(1))]
            if not all(1 <= n <= self.count for n in numbers):
                continue
            out.append(buffer[pos:m.start()])
            at = self._sent + sum(len(o) for o in out)
            self.citations += [(n, at) for n in numbers]
            pos = m.end()
        rest = buffer[pos:]
        tail = _OPEN_TAIL.search(rest)
        self._held = rest[tail.start():] if tail else ""
        out.append(rest[:tail.start()] if tail else rest)
        clean = "".join(out)
        self._sent += len(clean)
        return clean

    def end(self) -> str:
        rest, self._held = self._held, ""
        self._sent += len(rest)
        return rest
