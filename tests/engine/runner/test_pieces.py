"""A reply's text holds every token's bytes, however long its piece (runner/tokens.py ``piece``).

llama-cpp-python's ``detokenize`` reads a piece into 32 bytes and gives nothing for a longer one, and
SmolLM2 has 47 such tokens (a newline and 32 spaces, runs of dashes and hashes). The 10-minute grammar
fuzz run caught it: under ``{"pattern": "^-+$"}`` the model chose the 42-dash token, the grammar took
it, and the reply read ``{"a": ""}`` (a 500, ``reply_schema_mismatch``)."""

from __future__ import annotations

import ctypes

import llama_cpp
import pytest

from fireside.engine.runner.decode import Reply
from fireside.engine.runner.tokens import piece
from fireside.engine.types import Sampling
from tests.helpers.models import smollm2_file


@pytest.fixture(scope="module")
def vocab_only():
    return llama_cpp.Llama(model_path=str(smollm2_file()), vocab_only=True, verbose=False)


def test_every_token_reads_as_its_whole_piece(vocab_only):
    vocab, buf = vocab_only._model.vocab, ctypes.create_string_buffer(1024)
    long = 0
    for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, False)
        assert piece(vocab_only, token) == buf.raw[:n], token
        long += n > 32
    assert long >= 40  # the pieces llama-cpp-python's detokenize drops are there to be read


def test_a_reply_keeps_a_token_longer_than_32_bytes(vocab_only):
    dashes = vocab_only.tokenize(b"-" * 42, add_bos=False, special=False)
    assert len(dashes) == 1 and vocab_only._model.detokenize(dashes) == b""  # the library's reading
    reply = Reply(vocab_only, Sampling(max_tokens=8), 4, 0.0, 512)
    events = reply.push(dashes[0], False) + reply.end("stop")
    assert "".join(e.get("text", "") for e in events) == "-" * 42
