"""Prompt tokenization: the one place the runner turns a prompt into tokens.

A prompt is either a string (a raw completion prompt: special-token text in it becomes the special
tokens, as llama.cpp's server does) or a list of segments ``[(text, parse_special), ...]`` from a
rendered chat (``ChatTemplate.render_segments``): the template's own markup is parsed into its
control tokens, while message contents are tokenized as plain text, so a user who types
``<|im_end|>`` gets the characters, not the token. Each segment is tokenized on its own; a BOS, if
the model wants one, goes before the first.

Runs on the runner's worker thread (the only thread that touches the ``Llama``).
"""

from __future__ import annotations

from typing import Any

from ..protocol import Segments


def prompt_tokens(llama: Any, prompt: str | Segments, add_bos: bool) -> list[int]:
    """The tokens of ``prompt``: a string parsed for special tokens, or segments each as it says."""
    if isinstance(prompt, str):
        return llama.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
    tokens: list[int] = []
    for text, special in prompt:
        if text:
            tokens += llama.tokenize(text.encode("utf-8"), add_bos=add_bos and not tokens, special=bool(special))
    if not tokens and add_bos:
        tokens = llama.tokenize(b"", add_bos=True, special=True)
    return tokens
