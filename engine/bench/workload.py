"""The prompts a benchmark sends: random text of a fixed length drawn from a seed, or a prompt file.

A remote server's tokenizer is unknown here, so random prompts are made of common short English words,
each of which is one token (with its leading space) in the BPE vocabularies of the usual model
families; ``input_len`` words make a prompt of about ``input_len`` tokens. The server's own count
comes back in each reply's usage and is what the report shows. The same seed gives the same prompts,
and every request of a run gets a different prompt, so no level is helped by a cached prefix.
"""

from __future__ import annotations

import random
from pathlib import Path

WORDS = (
    "the of and to in is it you that he was for on are as with his they at be this have from or one had "
    "by word but not what all were we when your can said there use an each which she do how their if will "
    "up other about out many then them these so some her would make like him into time has look two more "
    "write go see number no way could people my than first water been call who oil its now find long down "
    "day did get come made may part over new sound take only little work know place year live me back give "
    "most very after thing our just name good sentence man think say great where help through much before "
    "line right too mean old any same tell boy follow came want show also around form three small set put "
    "end does another well large must big even such because turn here why ask went men read need land"
).split()


def random_prompts(count: int, input_len: int, seed: int) -> list[str]:
    """``count`` different prompts of ``input_len`` random words each, the same for the same seed."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(max(input_len, 1))) for _ in range(count)]


def file_prompts(path: Path, count: int, seed: int) -> list[str]:
    """``count`` prompts from a file (one per line, blank lines skipped), shuffled by the seed and reused
    in turn when the file has fewer lines than requests."""
    lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path} has no prompts (one per line)")
    random.Random(seed).shuffle(lines)
    return [lines[i % len(lines)] for i in range(count)]


def make_prompts(count: int, input_len: int, seed: int, prompt_file: Path | None = None) -> list[str]:
    if prompt_file is not None:
        return file_prompts(prompt_file, count, seed)
    return random_prompts(count, input_len, seed)
