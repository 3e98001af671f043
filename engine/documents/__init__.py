"""Documents and retrieval: reading files (PDF, DOCX, HTML, Markdown, plain text, source code) into
blocks that keep pages and headings, chunking them along that structure, and an index in SQLite that
finds passages by BM25 (FTS5) and by vectors (sqlite-vec), their scores mixed. Above the
index: uploaded files (``uploads.py``) and named collections of them, each with its own index, indexed in
the background (``collections.py``, the indexing in ``indexing.py``, a registry in ``registry.py``), searched
with a query within the caps (``query.py``), and numbered sources with the citation markers a reply writes
(``sources.py``).

Imports only the engine's leaf modules (``errors``); the engine's facade and the app sit above it.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "Chunk": "chunking",
    "chunk_document": "chunking",
    "Block": "document",
    "Document": "document",
    "DocumentIndex": "index",
    "Embedder": "index",
    "Hit": "index",
    "IndexedFile": "index",
    "SearchResult": "index",
    "can_read": "readers",
    "read_document": "readers",
    "reader_for": "readers",
    "CITATION": "grounding",
    "cited": "grounding",
    "question_with_sources": "grounding",
    "ranked": "grounding",
    "source_label": "grounding",
    "whole_document": "grounding",
    "choose_embedder": "embedding",
    "chosen_embedder": "embedding",
    "embedder_for": "embedding",
    "clipped_query": "query",
    "Collection": "collections",
    "Collections": "collections",
    "Member": "collections",
    "Passage": "collections",
    "query_over": "query",
    "CitationCutter": "sources",
    "grounded_prompt": "sources",
    "StoredFile": "uploads",
}
__all__ = ["Block", "CITATION", "Chunk", "CitationCutter", "Collection", "Collections", "Document",
           "DocumentIndex", "Embedder", "Hit", "IndexedFile", "Member", "Passage", "SearchResult",
           "StoredFile", "can_read", "choose_embedder", "chosen_embedder", "chunk_document", "cited",
           "clipped_query", "embedder_for", "grounded_prompt", "query_over", "question_with_sources",
           "ranked", "read_document", "reader_for", "source_label", "whole_document"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
