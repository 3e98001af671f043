"""Numbered sources: the prompt that hands a model its passages, and the ``[n]`` markers of a reply cut into
citations, whole or as it streams."""

from __future__ import annotations

import pytest

from fireside.engine.documents.sources import CitationCutter, grounded_prompt


@pytest.mark.parametrize("pieces", [["The lens is polished on Tuesday [1]. Tomatoes [2][3] grow [7] here [1, 2]"],
                                    ["The lens is polished on Tue", "sday [", "1]. Tomatoes [2]", "[3] grow [7] here [1,",
                                     " 2]"]])
def test_markers_are_cut_from_a_reply_whole_or_streamed_and_say_where_they_stood(pieces):
    cutter = CitationCutter(3)
    text = "".join(cutter.feed(p) for p in pieces) + cutter.end()
    assert text == "The lens is polished on Tuesday. Tomatoes grow [7] here"  # [7]: no such source, so text
    assert [(n, text[:i][-7:]) for n, i in cutter.citations] == [(1, "Tuesday"), (2, "omatoes"), (3, "omatoes"),
                                                                 (1, "7] here"), (2, "7] here")]


def test_the_grounded_prompt_numbers_each_source_with_its_place():
    class P:
        filename, text, heading, page = "ledger.pdf", "The quince trees were pruned.", "Orchard", 2

    prompt = grounded_prompt("When were they pruned?", [P()])
    assert "[1] ledger.pdf, page 2 · Orchard\nThe quince trees were pruned." in prompt
    assert prompt.endswith("Question: When were they pruned?") and "[1]" in prompt.split("Sources:")[1]
