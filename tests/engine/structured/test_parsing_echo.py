"""Template markup a model echoes is removed from the answer, however the stream splits it."""

from __future__ import annotations

import random

import pytest

from fireside.engine.structured.parsing import StreamParser

ECHOES = [("<tool_response>\nSunny, 21 C\n</tool_response>", "Sunny, 21 C\n"),
          ("It is sunny.<|im_end|>", "It is sunny."),
          ("<|start_header_id|>assistant<|end_header_id|>Hi<|eot_id|>", "assistantHi"),
          ("<start_of_turn>model\nHello<end_of_turn>", "Hello"),
          ("[TOOL_RESULTS]21 C[/TOOL_RESULTS] and a < b", "21 C and a < b")]


@pytest.mark.parametrize("tools", [True, False])
@pytest.mark.parametrize("text,answer", ECHOES)
def test_echoed_markup_is_removed_in_every_split_of_the_stream(text, answer, tools):
    rng = random.Random(27)
    for _ in range(60):
        cuts = sorted(rng.sample(range(1, len(text)), min(6, len(text) - 1)))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        parser = StreamParser(tools=tools)
        chunks = [c for piece in pieces for c in parser.feed(piece)] + list(parser.finish())
        texts = [c.text for c in chunks if c.kind == "text"]
        assert "".join(texts) == answer, pieces
        assert not any(c.kind == "tool_calls" for c in chunks)
