"""Retrieval over a small real corpus: the passage that answers a question comes first, by BM25 alone
(and the result says no embedder was used) and fused with the starter model as the embedder; a change
of embedder drops the old vectors; the same passage in two files is shown once; a file changed or
deleted after indexing is flagged on its hits; a re-add of an unchanged file does nothing."""

from __future__ import annotations

import pytest

from fireside.engine.documents import DocumentIndex, Embedder

from .files import write_docx, write_pdf

NOTES = {
    "bread.md": "# Baking\n\n## Sourdough\n\nFeed the sourdough starter with equal weights of flour and water every "
                "twelve hours, and bake once it doubles.\n\n## Rye\n\nRye dough is sticky; shape it with wet hands.\n",
    "bikes.md": "# Bicycles\n\n## Chains\n\nClean the chain with degreaser and oil each link after rides in rain.\n\n"
                "## Tyres\n\nRoad tyres hold 80 to 100 psi; check the pressure weekly.\n",
    "birds.txt": "Swallows migrate south in September and return to the same barn each spring.\n\n"
                 "Owls hunt at night and swallow small prey whole.\n",
    "tools.py": "def sharpen(chisel):\n    \"\"\"Hone the chisel on a 1000 grit stone, then strop it.\"\"\"\n    return chisel\n",
}


@pytest.fixture
def corpus(tmp_path):
    for name, text in NOTES.items():
        (tmp_path / name).write_text(text)
    write_pdf(tmp_path / "gauge.pdf", ["Introduction\nThis manual covers the harbor tide gauge.",
                                       "Calibration\nSet the float arm to the zero mark before each spring tide."])
    write_docx(tmp_path / "manual.docx")
    return tmp_path


def _index(folder, embedder=None) -> DocumentIndex:
    index = DocumentIndex(folder / "index.db", embedder)
    for path in sorted(folder.iterdir()):
        if path.name != "index.db" and not path.name.startswith("index.db"):
            index.add_file(path)
    return index


def test_bm25_alone_finds_the_answer_and_says_no_embedder_was_used(corpus):
    index = _index(corpus)
    result = index.search("How often do I feed a sourdough starter?")
    assert result.mode == "bm25" and "No embedder" in result.note
    top = result.hits[0]
    assert "every twelve hours" in top.text and top.heading == "Baking > Sourdough"
    assert top.path == str((corpus / "bread.md").resolve()) and top.vector_rank is None
    pdf_hit = index.search("where should the float arm be set before calibration?").hits[0]
    assert (pdf_hit.path.endswith("gauge.pdf"), pdf_hit.page) == (True, 2)
    docx_hit = index.search("how often is the compressor oil changed on the fog horn").hits[0]
    assert docx_hit.path.endswith("manual.docx") and docx_hit.page == 2 and docx_hit.heading.endswith("Fog Signal")
    assert index.search("how do I sharpen a chisel").hits[0].heading == "tools.py > def sharpen(chisel)"


def test_a_duplicate_passage_is_shown_once_and_stale_sources_are_flagged(corpus):
    (corpus / "copy.md").write_text((corpus / "bread.md").read_text())
    index = _index(corpus)
    hits = index.search("sourdough starter flour water").hits
    assert sum("every twelve hours" in h.text for h in hits) == 1
    assert index.add_file(corpus / "bikes.md").unchanged
    (corpus / "bikes.md").write_text(NOTES["bikes.md"].replace("weekly", "daily"))
    (corpus / "birds.txt").unlink()
    assert index.search("tyre pressure psi").hits[0].status == "changed"
    assert index.search("swallows migrate barn").hits[0].status == "missing"
    assert not index.add_file(corpus / "bikes.md").unchanged  # changed bytes: indexed again
    assert "daily" in index.search("tyre pressure psi").hits[0].text


@pytest.mark.model
def test_fused_with_the_starter_as_embedder_finds_the_answer(corpus, runtime):
    embedder = Embedder.from_engine(runtime, "starter")
    index = _index(corpus, embedder)
    assert index.embed_missing() == 0  # every passage got its vector when it was added
    result = index.search("How often do I feed a sourdough starter?")
    assert result.mode == "fused" and result.note == ""
    top = result.hits[0]
    assert "every twelve hours" in top.text and top.bm25_rank == 1 and top.vector_rank is not None
    vectors_only = index.search("When do swallows fly south?", mode="vectors")
    assert vectors_only.mode == "vectors" and all(h.bm25_rank is None for h in vectors_only.hits)
    index.close()

    other = Embedder("another-model", embedder.embed)
    reopened = DocumentIndex(corpus / "index.db", other)  # another embedder: the old vectors are dropped
    assert reopened.search("sourdough").mode == "bm25" and "another-model" in reopened.search("sourdough").note
    assert reopened.embed_missing() == len([c for _, _, c in reopened.files() for _ in range(c)])
    assert reopened.search("How often do I feed a sourdough starter?").mode == "fused"


def _bag_of_words(texts: list[str]) -> list[list[float]]:
    """A tiny real embedder: words hashed into 1,024 buckets, normalized (fast, so the cancel test needs no model)."""
    import math
    import re
    import zlib

    out = []
    for text in texts:
        v = [0.0] * 1024
        for word in re.findall(r"\w+", text.lower()):
            v[zlib.crc32(word.encode()) % 1024] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        out.append([x / norm for x in v])
    return out


def test_embedding_reports_progress_can_be_cancelled_and_resumes(tmp_path):
    long = tmp_path / "long.md"
    long.write_text("# Long\n\n" + "\n\n".join(f"## Part {i}\n\nParagraph {i} about topic{i}." for i in range(40)))
    index = DocumentIndex(tmp_path / "index.db", Embedder("bag-of-words", _bag_of_words))
    cancel, seen = __import__("threading").Event(), []

    def on_progress(done, total):
        seen.append((done, total))
        cancel.set()  # stop after the first batch

    added = index.add_file(long, cancel=cancel, on_progress=on_progress)
    assert added.chunks == 40 and added.embedded == 16 and seen == [(16, 40)]
    assert index.search("topic7").mode == "fused"  # BM25 finds every passage; vectors cover those embedded
    assert index.embed_missing() == 24 and index.embed_missing() == 0
    hit = index.search("Paragraph 33 about topic33", mode="vectors").hits[0]
    assert hit.heading == "Long > Part 33" and hit.vector_rank == 1
