"""The model that embeds documents: one choice kept in the config folder; choosing one re-embeds the
collections in the background (searches fuse keywords and vectors once the vectors are made); an embedder
that fails leaves every passage findable by keywords, and the search says why there are no vectors.

The embedder is the tiny random BERT of ``tests/helpers/bert_model.py`` through a real runtime: random
weights say nothing about meaning, so these tests check where vectors come from, not how good they are
(``bench/retrieval.py`` measures that with a real embedder)."""

from __future__ import annotations

import io

import pytest

from fireside.engine.documents import Embedder
from fireside.engine.documents.collections import Collections
from fireside.engine.documents.embedding import choose_embedder, chosen_embedder
from fireside.engine.errors import ModelNotFound
from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.bert_model import CLS, tiny_bert
from tests.helpers.waiting import wait_until

NOTES = b"# Lamp room\n\nThe lens is polished every Tuesday.\n\n# Garden\n\nTomatoes grow behind the tower.\n"


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("home"))})
    settings.ensure_dirs()
    tiny_bert(settings.models_dir, CLS, name="tiny-bert")
    library = Library(settings)
    rt = Runtime(settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0)
    yield rt
    rt.close()


def test_the_choice_is_kept_and_a_broken_file_means_none(tmp_path):
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})
    assert chosen_embedder(settings) is None
    choose_embedder(settings, "tiny-bert")
    assert chosen_embedder(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)})) == "tiny-bert"
    choose_embedder(settings, None)
    assert chosen_embedder(settings) is None
    (settings.config_dir / "documents.json").write_text("{not json")
    assert chosen_embedder(settings) is None


def _indexed(c: Collections) -> str:
    stored = c.uploads.save(io.BytesIO(NOTES), "notes.md", "assistants")
    made = c.create("notes", [stored.id])
    wait_until(lambda: c.get(made.id).status == "completed", timeout=30)
    return made.id


def test_choosing_an_embedder_re_embeds_the_collections_in_the_background(runtime, tmp_path):
    c = Collections(tmp_path / "knowledge")
    try:
        store = _indexed(c)
        assert c._index(store).search("lens polished").mode == "bm25"
        c.use_embedder(Embedder.from_engine(runtime, "tiny-bert"))
        wait_until(lambda: c._index(store).search("lens polished").mode == "fused", timeout=60)
        [lens] = c.search([store], "lens polished", k=1)
        assert lens.heading == "Lamp room"  # keywords still rank it first beside random vectors
    finally:
        c.close()
    reopened = Collections(tmp_path / "knowledge", Embedder.from_engine(runtime, "tiny-bert"))
    try:
        assert reopened._index(store).search("lens").mode == "fused"  # kept on disk: nothing to embed again
    finally:
        reopened.close()


def test_an_embedder_that_fails_leaves_the_passages_findable_by_keywords(tmp_path):
    def gone(texts):
        raise ModelNotFound("no model named 'nomic-embed' (it was deleted)")

    c = Collections(tmp_path / "knowledge", Embedder("nomic-embed", gone))
    try:
        store = _indexed(c)  # completed, not failed: the file's text is indexed whatever the embedder does
        result = c._index(store).search("lens polished")
        assert result.mode == "bm25"  # at once, while the embedder is still being tried ...
        # ... and once it has failed (on its own thread, after the text was indexed), the note says so
        wait_until(lambda: "nomic-embed could not embed" in c._index(store).search("lens polished").note, timeout=30)
        assert c._index(store).search("lens polished").mode == "bm25"
        assert c.search([store], "lens polished", k=1)[0].heading == "Lamp room"
    finally:
        c.close()



def test_setting_the_embedder_back_to_none_mid_embedding_stops_it_cleanly_and_says_how_far_it_got(runtime, tmp_path,
                                                                                                    caplog):
    """Issue 45: None chosen while a collection was being embedded crashed the worker ("'NoneType' object has
    no attribute 'embed'") and told nobody; now the run stops at its next batch, stores nothing under a
    name that is no longer chosen, and ``embedding()`` says how far it got while it runs."""
    import threading

    from fireside.engine.documents import store as index_store

    real = Embedder.from_engine(runtime, "tiny-bert")
    entered, release = threading.Event(), threading.Event()

    def gated(texts):  # the real embedder, held at its first batch so the change lands mid-run
        entered.set()
        release.wait(30)
        return real.embed(texts)

    part = " ".join(f"The lens of lamp {i} is polished on day {i} by keeper number {i}." for i in range(12))
    text = "".join(f"# Part {n}\n\n{part}\n\n" for n in range(40)).encode()
    c = Collections(tmp_path / "knowledge")
    try:
        made = c.create("long", [c.uploads.save(io.BytesIO(text), "long.md", "assistants").id])
        wait_until(lambda: c.get(made.id).status == "completed", timeout=30)
        c.use_embedder(Embedder("tiny-bert", gated))
        assert entered.wait(30)
        progress = c.embedding()
        assert progress is not None and progress.embedder == "tiny-bert" and progress.done == 0
        assert progress.total == c.members(made.id)[0].chunks > 16  # more than one batch: the run could go on
        c.use_embedder(None)
        assert c.embedding() is None
    finally:
        release.set()
        c.close()  # joins the worker, within one batch
    assert not [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    reopened = Collections(tmp_path / "knowledge")
    try:
        index = reopened._index(made.id)
        assert not index_store.vectors_ready(index._db)  # nothing kept under a name no longer chosen
        result = index.search("lens polished")
        assert result.mode == "bm25" and result.hits and "keywords alone" in result.note
    finally:
        reopened.close()
