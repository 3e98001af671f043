"""Documents and retrieval: reading files (PDF, DOCX, HTML, Markdown, plain text, source code) into
blocks that keep pages and headings, chunking them along that structure, and an index in SQLite that
finds passages by BM25 (FTS5) and by vectors (sqlite-vec), their scores mixed. Above the
index: uploaded files (``uploads.py``) and named collections of them, each with its own index, indexed in
the background (``collections.py``, a registry in ``registry.py``), and numbered sources with the
citation markers a reply writes (``sources.py``).

Imports only the engine's leaf modules (``errors``); the engine's facade and the app sit above it.
"""

from .chunking import Chunk, chunk_document
from .document import Block, Document
from .index import DocumentIndex, Embedder, Hit, IndexedFile, SearchResult
from .readers import can_read, read_document

__all__ = ["Block", "Chunk", "Document", "DocumentIndex", "Embedder", "Hit", "IndexedFile", "SearchResult",
           "can_read", "chunk_document", "read_document"]
