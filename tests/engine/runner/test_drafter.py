"""Where drafts come from (runner/drafts.py), on token lists: a prediction is followed, and picked
up again after an edit; prompt lookup drafts what followed the same tokens before; a source whose
drafts are refused is paused, so free writing is not slowed by guessing."""

from __future__ import annotations

from fireside.engine.runner.drafts import PAUSE, Drafter


def reply(drafter: Drafter, tokens: list[int]) -> None:
    for token in tokens:
        drafter.took(token)


def test_a_prediction_is_drafted_from_its_start_and_picked_up_again_after_an_edit():
    prediction = list(range(100, 140))
    d = Drafter([1, 2, 3], prediction, lookup=False)
    assert d.propose(4) == [100, 101, 102, 103]
    reply(d, [100, 101, 102, 103])
    assert d.propose(4) == [104, 105, 106, 107]
    reply(d, [104, 999])  # the reply leaves the prediction: a word replaced by another
    assert d.propose(4) == []  # nothing yet says where it goes on
    reply(d, [106])  # and it goes on after the replaced word
    assert d.propose(3) == [107, 108, 109]
    reply(d, [107, 108, 112])  # a few tokens left out: picked up just after them
    assert d.propose(2) == [113, 114]


def test_prompt_lookup_drafts_what_followed_the_same_tokens_earlier():
    passage = [10, 11, 12, 13, 14, 15, 16, 17]
    d = Drafter([1, *passage, 2, 3], None)
    assert d.propose(8) == []  # the prompt's end occurs nowhere earlier
    reply(d, [10, 11, 12])  # the reply starts quoting the passage
    assert d.propose(8) == [13, 14]  # a first draft is short
    d.verified(2, 2)
    reply(d, [13, 14])
    assert d.propose(8) == [15, 16, 17, 2]  # taken whole: the next is twice as long


def test_prompt_lookup_pauses_when_its_drafts_are_refused():
    d = Drafter([5, 6, 7, 8] * 10, None)
    refused = 0
    while refused < 16:  # every draft refused: free writing that happens to hit the lookup
        draft = d.propose(8)
        assert draft
        d.verified(len(draft), 0)
        refused += len(draft)
    assert all(d.propose(8) == [] for _ in range(PAUSE))  # paused for PAUSE steps
    assert d.propose(8)  # then tried again
