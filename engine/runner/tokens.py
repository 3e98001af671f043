"""Prompt tokenization: the one place the runner turns a prompt into tokens, and the prompt size cap.

A prompt is either a string (a raw completion prompt: special-token text in it becomes the special
tokens, as llama.cpp's server does) or a list of segments ``[(text, parse_special), ...]`` from a
rendered chat (``ChatTemplate.render_segments``): the template's own markup is parsed into its
control tokens, while message contents are tokenized as plain text, so a user who types
``<|im_end|>`` gets the characters, not the token. Each segment is tokenized on its own; a BOS, if
the model wants one, goes before the first.

Each text is tokenized once, into a buffer sized from its bytes (no token covers less than one byte
of its text, bar the BOS, EOS and a leading space the tokenizer may add): llama-cpp-python's
``Llama.tokenize`` tries a context-sized buffer first and, for a longer text, tokenizes it all again.

The size cap: no token covers more bytes of text than the vocabulary's longest token piece, so a
prompt of more than ``n_ctx * longest_piece`` characters (a character is at least one byte) cannot
fit in an ``n_ctx``-token context, whatever it says. ``protocol.max_prompt_chars`` gives that bound; the
runtime refuses longer prompts in the app process before anything tokenizes them.

Threading: the runner calls these on its tokenizer thread, never on the decode thread (runner.py).
llama.cpp's tokenizer only reads the vocabulary, and llama-server tokenizes on its HTTP threads
while its main loop decodes; ctypes releases the GIL during the call, so a long prompt costs the
streams being decoded nothing.
"""

from __future__ import annotations

import ctypes
from typing import Any

from ..protocol import Segments

SPARE_TOKENS = 4  # BOS, EOS and a leading-space token a tokenizer may add beyond one per byte


def longest_piece(llama: Any) -> int:
    """The most bytes one token of ``llama``'s vocabulary stands for (control tokens as their text).
    About 4 us a token: 0.2 s for a 49k vocabulary, at load."""
    import llama_cpp

    vocab = llama._model.vocab
    buf = ctypes.create_string_buffer(256)
    longest = 0
    for token in range(llama_cpp.llama_vocab_n_tokens(vocab)):
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, True)
        longest = max(longest, -n if n < 0 else n)  # a piece too long for the buffer says its length, negated
    return longest


def piece(llama: Any, token: int) -> bytes:
    """The bytes ``token`` stands for in a reply's text (a control token stands for none, as in
    llama-cpp-python's ``detokenize``), however many. That ``detokenize`` reads each piece into 32
    bytes and gives nothing for a longer one: SmolLM2 has 47 such tokens (a newline and 32 spaces of
    indentation, 42 dashes of a Markdown rule), which replies lost (fuzz/fuzz_grammar.py: the grammar
    took the dashes for ``"^-+$"`` and the reply read ``""``)."""
    import llama_cpp

    vocab = llama._model.vocab
    buf = ctypes.create_string_buffer(64)
    n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, False)
    if n < 0:  # longer than the buffer: it says how long, negated
        buf = ctypes.create_string_buffer(-n)
        n = llama_cpp.llama_token_to_piece(vocab, token, buf, len(buf), 0, False)
    return buf.raw[:max(n, 0)]


def tokenize(llama: Any, data: bytes, add_bos: bool, special: bool) -> list[int]:
    """The tokens of ``data``, tokenized once."""
    import llama_cpp

    vocab = llama._model.vocab
    room = len(data) + SPARE_TOKENS
    while True:
        buf = (llama_cpp.llama_token * room)()
        n = llama_cpp.llama_tokenize(vocab, data, len(data), buf, room, add_bos, special)
        if n >= 0:
            return buf[:n]
        room = -n  # more tokens than bytes: a tokenizer that expands (never seen); size it exactly


def prompt_tokens(llama: Any, prompt: str | Segments, add_bos: bool) -> list[int]:
    """The tokens of ``prompt``: a string parsed for special tokens, or segments each as it says."""
    if isinstance(prompt, str):
        return tokenize(llama, prompt.encode("utf-8"), add_bos, True)
    tokens: list[int] = []
    for text, special in prompt:
        if text:
            tokens += tokenize(llama, text.encode("utf-8"), add_bos and not tokens, bool(special))
    if not tokens and add_bos:
        tokens = tokenize(llama, b"", True, True)
    return tokens
