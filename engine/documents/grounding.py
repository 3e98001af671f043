"""Grounding a reply in documents: the passages a model is given, numbered as sources it is asked to cite
as ``[n]``, and the words that name each source (its file, page and heading).

A source is a plain dict, so it can be saved with a reply as JSON and exported as it is:
``{"n": 1, "file": "report.pdf", "page": 7, "page_end": 7, "heading": "Results", "text": "...",
"name": "<saved file>", "ordinal": 12, "mode": "whole" | "retrieved", "rank": 1}``; a passage found in
a knowledge collection adds ``collection`` (its name), ``collection_id`` and ``file_id``. ``mode`` says how
it reached the model: its whole document fitted the context, or the passage was retrieved for the
question; ``rank`` orders the sources by how well they match the question.

Pure functions over strings and dicts; any thread.
"""

from __future__ import annotations

import re

from .index import _STOPWORDS

CITE = ("Answer from the numbered sources. After each sentence that uses a source, cite it by its number "
        "in square brackets, like [1].")

# ``[3]`` as a citation, not part of a link (``[3](...)``), an index (``a[3]``) or a nested bracket
CITATION = re.compile(r"(?<![\w\]\[])\[(\d{1,3})\](?![\[(])")


def source_label(source: dict) -> str:
    """``report.pdf, page 7 · Results > Method``: where a source lies, in words (a passage of a knowledge
    collection names it: ``report.pdf in Reports, page 7``)."""
    where = [str(source.get("file") or "a document") + (f" in {source['collection']}" if source.get("collection") else "")]
    page, end = source.get("page"), source.get("page_end")
    if page is not None:
        where.append(f"pages {page}-{end}" if end not in (None, page) else f"page {page}")
    label = ", ".join(where)
    return f"{label} · {source['heading']}" if source.get("heading") else label


def numbered(sources: list[dict]) -> str:
    """The sources as the model reads them: each ``[n] where`` line, then its text."""
    return "\n\n".join(f"[{s['n']}] {source_label(s)}\n{s['text']}" for s in sources)


def whole_document(label: str, pages: int | None, sources: list[dict]) -> str:
    """A document given whole: its file name (and page count), then every passage as a numbered source,
    each headed by its page, so the model sees the page markers and can cite any part."""
    head = f"Document: {label}" + (f" ({pages} pages)" if pages else "")
    return f"{head}\n\n{numbered(sources)}\n\nEnd of document: {label}"


def question_with_sources(question: str, retrieved: list[dict]) -> str:
    """The user's question with the passages retrieved for it (if any) and the request to cite them."""
    block = f"Sources:\n\n{numbered(retrieved)}\n\n" if retrieved else ""
    return f"{block}{CITE}\n\nQuestion: {question}" if question else f"{block}{CITE}"


def ranked(sources: list[dict], question: str) -> list[dict]:
    """``sources`` each with its ``rank`` (1 = the best) by how many of the question's words its passage
    holds (its heading included); ties keep their order. A document given whole lists every passage as
    a source: the rank is what puts the ones that match the question first."""
    words = _terms(question)
    scores = {s["n"]: len(words & _terms(f"{s.get('heading', '')} {s['text']}")) for s in sources}
    order = sorted(sources, key=lambda s: (-scores[s["n"]], s.get("mode") != "retrieved", s["n"]))
    rank = {s["n"]: i for i, s in enumerate(order, 1)}
    return [{**s, "rank": rank[s["n"]]} for s in sources]


def _terms(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if w not in _STOPWORDS and len(w) > 1}


def cited(text: str, count: int) -> list[int]:
    """The source numbers ``text`` cites, in order of first citation, within 1..``count``."""
    return list(dict.fromkeys(n for n in (int(m.group(1)) for m in CITATION.finditer(text)) if 1 <= n <= count))
