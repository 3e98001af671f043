"""Prompt tokenization: the one place the runner turns a prompt into tokens.

Runs on the runner's worker thread (the only thread that touches the ``Llama``).
"""

from __future__ import annotations

from typing import Any


def prompt_tokens(llama: Any, prompt: str, add_bos: bool) -> list[int]:
    """The tokens of a rendered prompt; the template's markup is parsed into its special tokens."""
    return llama.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
