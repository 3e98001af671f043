"""Dedicated embedders (BERT GGUFs such as all-MiniLM, bge, nomic-embed) embed as their own header says,
and a passage longer than their short context is embedded from its start when the caller asks for it;
asked for a reply, one says it only embeds (it would otherwise "reply" with nothing).

The embedder is a tiny random BERT written with the ``gguf`` package (``tests/helpers/bert_model.py``),
checked against its NumPy oracle: one whose header names CLS pooling must give the [CLS] token's vector
(bge's way), not the mean Fireside uses for chat models as embedders; an input past its 32-token
context is refused by default and, with ``truncate``, embedded from its first tokens, as Ollama's
``/api/embed`` does by default (``truncate: false`` there gives a 400 that says why).
"""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from fireside.engine.errors import ContextOverflow
from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.bert_model import CLS, MEAN, SPECIAL, TINY, WORDS, embed, tiny_bert

VOCAB = SPECIAL + list(dict.fromkeys(WORDS))
TEXT = "the cat read a file by the river"


def _ids(text: str) -> list[int]:
    return [VOCAB.index("[CLS]"), *(VOCAB.index(w) for w in text.split()), VOCAB.index("[SEP]")]


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    """(runtime, library, weights): the tiny embedder in a library of its own, as ``tiny-bert``."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("home"))})
    settings.ensure_dirs()
    _, weights = tiny_bert(settings.models_dir, CLS, name="tiny-bert")
    library = Library(settings)
    rt = Runtime(settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0)
    yield rt, library, weights
    rt.close()


def test_an_embedder_pools_as_its_header_says(embedder):
    rt, _, weights = embedder
    model = "tiny-bert"
    (got,), tokens = rt.embed(model, [TEXT])
    got = np.array(got)
    assert tokens == len(_ids(TEXT))
    assert got @ embed(weights, TINY, _ids(TEXT), CLS) > 0.999
    assert got @ embed(weights, TINY, _ids(TEXT), MEAN) < 0.99  # the mean, as before, is another vector


def test_a_passage_past_the_context_is_refused_or_embedded_from_its_start(embedder):
    rt, _, weights = embedder
    model = "tiny-bert"
    long = " ".join(["the cat read a file by the river"] * 6)  # 48 words: past the 32-token context
    with pytest.raises(ContextOverflow, match="the context holds 32"):
        rt.embed(model, [long])
    vectors, tokens = rt.embed(model, [long, TEXT], truncate=True)
    first = _ids(long)[:32]  # what is embedded: the first 32 tokens ([CLS] and 31 words)
    assert tokens == 32 + len(_ids(TEXT))
    assert np.array(vectors[0]) @ embed(weights, TINY, first, CLS) > 0.999
    assert np.array(vectors[1]) @ embed(weights, TINY, _ids(TEXT), CLS) > 0.999


def test_many_passages_in_one_call_are_packed_together_and_each_is_embedded_alone(embedder):
    """The runner embeds a call's inputs together, several sequences to a batch; attention must not reach
    across them: each vector is its own passage's, as if it had been embedded by itself."""
    rt, _, weights = embedder
    texts = [" ".join(WORDS[i:i + n]) for i, n in ((0, 3), (5, 12), (20, 1), (30, 7), (40, 20), (3, 9))]
    vectors, tokens = rt.embed("tiny-bert", texts)
    assert tokens == sum(len(_ids(t)) for t in texts)
    for text, got in zip(texts, vectors):
        assert np.array(got) @ embed(weights, TINY, _ids(text), CLS) > 0.999


@pytest.fixture(scope="module")
def base_url(embedder):
    rt, library, _ = embedder
    thread = ServerThread(create_app(rt, rt.settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread.url
    thread.stop()


def test_ollama_embed_truncates_by_default_and_says_why_when_told_not_to(base_url):
    long = " ".join(["the sky is blue"] * 12)
    ok = httpx.post(f"{base_url}/api/embed", json={"model": "tiny-bert", "input": [long, "the dog"]}, timeout=60)
    assert ok.status_code == 200, ok.text
    assert len(ok.json()["embeddings"]) == 2 and ok.json()["prompt_eval_count"] == 32 + 4
    refused = httpx.post(f"{base_url}/api/embed", json={"model": "tiny-bert", "input": long, "truncate": False},
                         timeout=60)
    assert refused.status_code == 400 and "context holds 32" in refused.json()["error"]


def test_an_embedder_asked_for_a_reply_says_it_only_embeds(base_url):
    import openai

    client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="none")
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny-bert", messages=[{"role": "user", "content": "hi"}])
    assert err.value.code == "model_embeds_only" and "cannot write replies" in err.value.message
    shown = httpx.post(f"{base_url}/api/show", json={"model": "tiny-bert"}, timeout=30).json()
    assert shown["capabilities"] == ["embedding"]
