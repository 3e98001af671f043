"""How library models are named: stable ids from their place on disk, and short aliases people type.

One rule for every source. The id is the model's place under a models root, ``publisher/repo/file``
without ``.gguf`` (a split set is named after its first part, without the ``-00001-of-00003`` suffix),
less a file name that only repeats its folder's (GPT4All's ``gpt4all/X/X.gguf`` is ``gpt4all/X``) or
says nothing (Jan's ``jan/qwen3-0.6b/model.gguf`` is ``jan/qwen3-0.6b``). The alias is a lowercase
``name:tag``: the name is the file's, less its quantization; the tag is the source's own (Ollama's
tag; the quantization the hub, LM Studio and the Hugging Face cache name their files by) or, for
files that carry no trustworthy name (GPT4All, Jan, a file imported by hand), the quantization the
GGUF header declares. So ``bartowski/SmolLM2-135M-Instruct-GGUF/SmolLM2-135M-Instruct-Q4_1`` is
``smollm2-135m-instruct:q4_1`` and Ollama's ``llama3.2:1b`` stays ``llama3.2:1b``. When two models
would share an alias, the one added first keeps it and the others get ``-2``, ``-3``. The names an
older Fireside gave (the longer id, the publisher-prefixed alias) keep resolving: ``former_names``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..models import SPLIT_RE, ModelInfo
from .starter import STARTER_ID

QUANT_RE = re.compile(r"[-_.](?P<q>I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32)$", re.IGNORECASE)
_SLUG_RE = re.compile(r"[^a-z0-9._-]+")
_GGUF_RE = re.compile(r"[-_.]gguf$", re.IGNORECASE)
_QUANT_ONLY_RE = re.compile(r"I?Q\d(?:_[A-Z0-9]+)*|BF16|F16|F32", re.IGNORECASE)
GENERIC_STEMS = frozenset({"model"})  # Jan names every model file model.gguf
GENERIC_FOLDERS = frozenset({"tmp", "temp", "downloads", "download", "desktop", "documents", "models", "model",
                             "gguf", "ggufs", "llm", "llms", "home"})  # places, not model names
OWN_TAG_APPS = frozenset({"ollama"})  # the file is named after the source's tag (``1b``, ``latest``)
HEADER_TAG_APPS = frozenset({"gpt4all", "jan", "file"})  # names a person typed: trust the header


@dataclass(frozen=True)
class Named:
    """What naming needs to know of one model."""

    id: str
    full_id: str  # the id before repeated parts were dropped (an older Fireside's id)
    quant: str | None  # the header's quantization
    app: str  # "hub", "local", or the app an import came from ("ollama", "gpt4all", "file", ...)
    added_at: float = 0.0


def full_id(relative: str) -> str:
    """``publisher/repo/stem`` of the model whose first file is at ``relative`` (a POSIX path)."""
    name = PurePosixPath(relative)
    m = SPLIT_RE.match(name.name)
    stem = m["stem"] if m else name.stem
    return str(name.with_name(stem))


def model_id(relative: str) -> str:
    """The id of the model whose first file is at ``relative`` (a POSIX path inside a models root)."""
    return short_id(full_id(relative))


def import_repo(path: Path) -> str:
    """The ``repo`` part of a GGUF imported by hand from ``path``: its folder's name when the folder names
    the model (``Qwen3-0.6B-GGUF``), else the file's name less its quantization (``/tmp/x.gguf`` is
    ``local/x``, not ``local/tmp/x``)."""
    folder = path.parent.name
    if folder and folder.lower() not in GENERIC_FOLDERS and path.parent != Path.home():
        return folder
    stem = path.name[:-5] if path.name.lower().endswith(".gguf") else path.stem
    return QUANT_RE.sub("", stem) or stem or "imported"


def short_id(full: str) -> str:
    """``publisher/repo/file`` less a file name that repeats the repo's or says nothing (never shorter
    than ``publisher/repo``)."""
    parts = full.split("/")
    if len(parts) >= 3 and (parts[-1].lower() == parts[-2].lower() or parts[-1].lower() in GENERIC_STEMS):
        return "/".join(parts[:-1])
    return full


def quant_of(stem: str) -> str | None:
    """The quantization written in a file name (``Q4_K_M``, ``IQ3_XS``, ``F16``), upper-case."""
    if _QUANT_ONLY_RE.fullmatch(stem):
        return stem.upper()
    m = QUANT_RE.search(stem)
    return m["q"].upper() if m else None


def header_quant(info: ModelInfo) -> str | None:
    """The quantization the GGUF header declares (``general.file_type``), else its main tensor type."""
    ft = (info.file_type or "").upper().removeprefix("ALL_")
    if ft and ft not in ("GUESSED", "UNKNOWN"):
        return ft
    mix = [t for t in (info.quant_mix or {}) if t]
    return mix[0].upper() if mix else None


def slug(text: str) -> str:
    return _SLUG_RE.sub("-", text.lower()).strip("-.") or "model"


def _name_part(text: str) -> str:
    """``text`` less its quantization and a ``-GGUF`` (empty when it is only a quantization)."""
    if _QUANT_ONLY_RE.fullmatch(text):
        return ""
    m = QUANT_RE.search(text)
    return _GGUF_RE.sub("", text[:m.start()] if m else text).strip("-_. ")


def base_alias(model: Named) -> str:
    """The model's ``name:tag`` before collisions are settled."""
    parts = model.id.split("/")
    if model.app in OWN_TAG_APPS and len(parts) >= 2:
        return f"{slug(_GGUF_RE.sub('', parts[-2]) or parts[-2])}:{slug(parts[-1])}"
    stem = model.full_id.split("/")[-1]
    name = _name_part(parts[-1]) or (_name_part(parts[-2]) if len(parts) >= 2 else "") or parts[-1]
    named = None if model.app in HEADER_TAG_APPS else quant_of(stem)
    tag = named or model.quant or quant_of(stem)
    return f"{slug(name)}:{slug(tag)}" if tag else slug(name)


def assign_aliases(models: list[Named]) -> dict[str, list[str]]:
    """Each model's alias: its base alias, with ``-2``, ``-3`` for the second and later model (by the
    time it was added) that would share it. An alias never equals another model's id."""
    taken = {m.id for m in models} | {STARTER_ID}
    out: dict[str, list[str]] = {}
    for m in sorted(models, key=lambda m: (m.added_at, m.id)):
        base = base_alias(m)
        alias, n = base, 1
        while alias in taken:
            n += 1
            alias = f"{base}-{n}"
        taken.add(alias)
        out[m.id] = [alias]
    return out


def former_names(models: list[Named], aliases: dict[str, list[str]]) -> dict[str, list[str]]:
    """The names an older Fireside gave each model, that still find it: its longer id, and its alias
    by the file name (``folder:file`` or ``publisher/name:quant`` when two shared a name)."""
    old = _old_aliases([m.full_id for m in models])
    out: dict[str, list[str]] = {}
    for m in models:
        names = [m.full_id] if m.full_id != m.id else []
        names += [a for a in old.get(m.full_id, []) if a not in aliases.get(m.id, [])]
        out[m.id] = names
    return out


def _old_base_alias(mid: str) -> str:
    path = PurePosixPath(mid)
    stem = path.name
    m = QUANT_RE.search(stem)
    if m and m.start() > 0:
        return f"{slug(stem[:m.start()])}:{m['q'].lower()}"
    parent = path.parent.name
    return f"{slug(parent)}:{slug(stem)}" if parent else slug(stem)


def _old_aliases(ids: Iterable[str]) -> dict[str, list[str]]:
    """The aliases Fireside gave before one naming rule covered every source."""
    ids = list(ids)
    bases = {mid: _old_base_alias(mid) for mid in ids}
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
    return out
