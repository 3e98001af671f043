"""The documents of a chat turned into what its reply is given: the text of the documents that fit, the
passages that best answer the question, and the numbered sources the model is asked to cite as ``[n]``.

``Grounder.ground`` runs on the reply's worker (it reads the disk and counts tokens with the model's
tokenizer). The reply's budget is the loaded model's context (``DEFAULT_CONTEXT`` for a model not loaded
here), less room for the reply, the chat template's own tokens and the chat so far; the chat's documents
are taken oldest first, and each that fits the budget goes in whole, in the message that attached it, as
numbered passages (the same text each turn, so the prompt cache keeps it). A longer one is indexed in the
chat's own index (``data_dir/documents/chats/<chat id>.sqlite``: FTS5 BM25, with vectors when an embedder
is set) and up to ``MAX_PASSAGES`` of its passages that best match the question go in front of the
question, numbered after the whole ones; so do those of the knowledge collections the chat ticked. The
sources' format and their words are the engine's (``engine/documents/grounding.py``); the documents
themselves, read and saved, are ``chatdocs.py``'s.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from fireside.engine.documents import (
    DocumentIndex,
    Embedder,
    chunk_document,
    question_with_sources,
    ranked,
    whole_document,
)

SAVED_DOCUMENT = "saved_document"  # a message content part {"type": "saved_document", "name", "file", "pages"}
DEFAULT_CONTEXT = 4096  # a model not loaded here (a remote one): the budget assumes this much context
MAX_PASSAGES = 5
OVERHEAD = 96  # the chat template's own tokens, per request


class Grounder:
    """Grounds replies in the documents of ``docs``, the ``ChatDocuments`` that reads the saved documents
    (``document``, ``path``, ``folder``) and knows the engine, the embedder model and the knowledge
    collections."""

    def __init__(self, docs):
        self.docs = docs

    @staticmethod
    def wanted(messages: list[dict[str, Any]]) -> bool:
        return any(_is_doc(p) for m in messages if isinstance(m.get("content"), list) for p in m["content"])

    def ground(self, chat_id: int | None, model_id: str, messages: list[dict[str, Any]], max_tokens: int | None,
               cancel: threading.Event | None = None, collections: list[str] = ()
               ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """``messages`` with their documents as text, and the reply's sources ``{"items": [...], "note": str}``
        (see ``engine/documents/grounding.py``). ``collections``: the knowledge collections the chat ticked;
        the passages they hold that best answer the question go in front of it, numbered after the
        chat's own documents' (each source names its ``collection``)."""
        n_ctx = self._context_size(model_id)
        room = max(64, min(max_tokens or n_ctx // 4, n_ctx // 2))
        plain = [_without_docs(m) for m in messages]
        budget = n_ctx - room - OVERHEAD - sum(self._tokens(model_id, _text_of(m)) for m in plain)
        parts = list(dict.fromkeys(p["name"] for m in messages for p in _doc_parts(m)))
        files = {p["name"]: p for m in messages for p in _doc_parts(m)}
        items: list[dict] = []
        whole: dict[str, str] = {}
        long: list[str] = []
        for name in parts:  # oldest first: a document attached earlier keeps its place (and its cache)
            chunks = chunk_document(self.docs.document(name))
            sources = [_source(len(items) + i + 1, files[name], name, c, "whole") for i, c in enumerate(chunks)]
            text = whole_document(files[name].get("file") or name, files[name].get("pages"), sources)
            cost = self._tokens(model_id, text, budget)
            if cost <= budget:
                budget -= cost
                items += sources
                whole[name] = text
            else:
                long.append(name)
        question = _text_of(plain[-1]) if plain and plain[-1].get("role") == "user" else ""
        retrieved, note = self._retrieve(chat_id, long, files, question, budget, len(items), model_id, cancel)
        if collections and question:
            budget -= sum(self._tokens(model_id, s["text"]) + 16 for s in retrieved)
            retrieved += self._from_collections(list(collections), question, budget, len(items) + len(retrieved),
                                                model_id)
        out = [_as_text(m, whole) for m in messages]
        if out and out[-1].get("role") == "user":
            out[-1] = _as_text(messages[-1], whole, question_with_sources(question, retrieved))
        return out, {"items": ranked(items + retrieved, question), "note": note}

    def _retrieve(self, chat_id, names: list[str], files: dict, question: str, budget: int, first: int,
                  model_id: str, cancel) -> tuple[list[dict], str]:
        if not names:
            return [], ""
        model = self.docs.embedder_model
        embedder = Embedder.from_engine(self.docs.engine, model) if model else None
        (self.docs.folder / "chats").mkdir(parents=True, exist_ok=True)
        index = DocumentIndex(self.docs.folder / "chats" / f"{chat_id}.sqlite", embedder)
        try:
            paths = {str(self.docs.path(name).resolve()): name for name in names}
            indexed = {row[0] for row in index.files()}
            for path, name in paths.items():
                if path not in indexed:  # the document read when it was attached, not read again
                    doc = self.docs.document(name)
                    doc.path = path
                    index.add_document(doc, stat=os.stat(path), digest=name.split(".")[0], cancel=cancel)
            if embedder is not None:  # passages indexed before this embedder was chosen get its vectors
                index.embed_missing(cancel=cancel)
            result = index.search(question or " ".join(files[n].get("file", "") for n in names), k=40)
        finally:
            index.close()
        found: list[dict] = []
        ordinals = {name: {c.text: c.ordinal for c in chunk_document(self.docs.document(name))} for name in names}
        for hit in result.hits:
            if hit.path not in paths:
                continue  # another document of this chat (another branch's, or one given whole)
            name = paths[hit.path]
            source = {"n": first + len(found) + 1, "file": files[name].get("file") or name, "page": hit.page,
                      "page_end": hit.page_end, "heading": hit.heading, "text": hit.text, "name": name,
                      "ordinal": ordinals[name].get(hit.text), "mode": "retrieved", "found_by": result.mode}
            cost = self._tokens(model_id, source["text"]) + 16
            if cost > budget:
                break
            budget -= cost
            found.append(source)
            if len(found) == MAX_PASSAGES:
                break
        return found, result.note

    def _from_collections(self, ids: list[str], question: str, budget: int, first: int, model_id: str) -> list[dict]:
        """The passages of knowledge collections ``ids`` that best answer ``question``, as numbered sources."""
        if self.docs.knowledge is None:
            return []
        names = self.docs.knowledge.names(ids)
        found: list[dict] = []
        for p in self.docs.knowledge.search(ids, question, MAX_PASSAGES):
            source = {"n": first + len(found) + 1, "file": p.filename, "page": p.page, "page_end": p.page,
                      "heading": p.heading, "text": p.text, "name": "", "ordinal": None, "mode": "retrieved",
                      "found_by": p.found_by,
                      "collection": names.get(p.collection_id, ""), "collection_id": p.collection_id,
                      "file_id": p.file_id}
            cost = self._tokens(model_id, p.text) + 16
            if cost > budget:
                break
            budget -= cost
            found.append(source)
        return found

    def _context_size(self, model_id: str) -> int:
        loaded = {m.model_id: m for m in self.docs.engine.loaded()}
        return loaded[model_id].n_ctx if model_id in loaded else DEFAULT_CONTEXT

    def _tokens(self, model_id: str, text: str, budget: int | None = None) -> int:
        """``text``'s length in the model's tokens (an estimate where the model cannot count them here, or
        where ``text`` is plainly over ``budget``: tokenizing a long book to learn it is long is waste)."""
        if not text:
            return 0
        if budget is not None and len(text) > 8 * max(budget, 1):
            return len(text) // 3
        try:
            return len(self.docs.engine.tokenize(model_id, text))
        except Exception:  # noqa: BLE001 - a remote model, or one not loaded: estimate (3 characters a token)
            return len(text) // 3 + 1


def _is_doc(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == SAVED_DOCUMENT


def _doc_parts(message: dict) -> list[dict]:
    content = message.get("content")
    return [p for p in content if _is_doc(p)] if isinstance(content, list) else []


def _source(n: int, file: dict, name: str, chunk, mode: str) -> dict:
    return {"n": n, "file": file.get("file") or name, "page": chunk.page, "page_end": chunk.page_end,
            "heading": chunk.heading, "text": chunk.text, "name": name, "ordinal": chunk.ordinal, "mode": mode}


def _text_of(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type") == "text")


def _without_docs(message: dict) -> dict:
    content = message.get("content")
    if not isinstance(content, list):
        return message
    return {**message, "content": [p for p in content if not _is_doc(p)]}


def _as_text(message: dict, whole: dict[str, str], own_text: str | None = None) -> dict:
    """``message`` with each document part replaced by its whole text (before the message's own text),
    or dropped (a long document: its passages go with the question); ``own_text``, when given, takes
    the place of the message's own text (the question, with its sources)."""
    content = message.get("content")
    if own_text is None and not _doc_parts(message):
        return message
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    docs = [{"type": "text", "text": whole[p["name"]]} for p in content if _is_doc(p) and p["name"] in whole]
    rest = [p for p in content if not _is_doc(p)]
    if own_text is not None:
        rest = [{"type": "text", "text": own_text}] + [p for p in rest if p.get("type") != "text"]
    content = docs + rest
    if all(p.get("type") == "text" for p in content):  # text only: one string, as a model without vision reads
        return {**message, "content": "\n\n".join(p["text"] for p in content if p["text"])}
    return {**message, "content": content}
