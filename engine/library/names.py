"""How library models are named: stable ids from their place on disk, and short aliases people type.

A file at ``ROOT/bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1.gguf`` gets the id
``bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1`` (a split set is named after its
first part, without the ``-00001-of-00003`` suffix) and the alias ``smollm2-135m-instruct:q4_1``.
When two models would share an alias, each gets it prefixed with its publisher instead, so an alias
never silently changes which model it means.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import PurePosixPath

from ..models.inspection import SPLIT_RE

QUANT_RE = re.compile(r"[-_.](?P<q>I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32)$", re.IGNORECASE)
_SLUG_RE = re.compile(r"[^a-z0-9._-]+")


def model_id(relative: str) -> str:
    """The id of the model whose first file is at ``relative`` (a POSIX path inside a models root)."""
    name = PurePosixPath(relative)
    m = SPLIT_RE.match(name.name)
    stem = m["stem"] if m else name.stem
    return str(name.with_name(stem))


def quant_of(stem: str) -> str | None:
    """The quantization written in a file name (``Q4_K_M``, ``IQ3_XS``, ``F16``), upper-case."""
    m = QUANT_RE.search(stem)
    return m["q"].upper() if m else None


def slug(text: str) -> str:
    return _SLUG_RE.sub("-", text.lower()).strip("-.") or "model"


def base_alias(mid: str) -> str:
    """``name:quant`` from the file name; ``folder:file`` when the name has no quantization
    (Ollama's ``llama3/8b`` becomes ``llama3:8b``)."""
    path = PurePosixPath(mid)
    stem = path.name
    m = QUANT_RE.search(stem)
    if m and m.start() > 0:
        return f"{slug(stem[:m.start()])}:{m['q'].lower()}"
    parent = path.parent.name
    return f"{slug(parent)}:{slug(stem)}" if parent else slug(stem)


def assign_aliases(ids: list[str]) -> dict[str, list[str]]:
    """Each id's aliases: its base alias when unique, else ``publisher/alias`` when that is unique."""
    bases = {mid: base_alias(mid) for mid in ids}
    counts = Counter(bases.values())
    out: dict[str, list[str]] = {}
    prefixed: dict[str, str] = {}
    for mid, alias in bases.items():
        if counts[alias] == 1 and alias not in ids:
            out[mid] = [alias]
        elif "/" in mid:
            prefixed[mid] = f"{slug(mid.split('/')[0])}/{alias}"
    pcounts = Counter(prefixed.values())
    for mid, alias in prefixed.items():
        if pcounts[alias] == 1 and alias not in ids:
            out[mid] = [alias]
    return {mid: out.get(mid, []) for mid in ids}
