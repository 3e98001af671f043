"""A search's query within the caps (``limits.py``): each distinct word of a query is an OR term of the
keyword search, so a query past ``MAX_QUERY_CHARS`` characters or ``MAX_QUERY_TERMS`` distinct words costs
seconds. ``query_over`` says why a query is too much (the vector stores' search refuses it with that), and
``clipped_query`` cuts one to fit (a long message searched as it comes: ``Collections.search``, file_search).
"""

from __future__ import annotations

import re

from .limits import MAX_QUERY_CHARS, MAX_QUERY_TERMS

_WORD = re.compile(r"\w+")


def query_over(query: str) -> str | None:
    """Why ``query`` is too much to search (each distinct word is an OR term of the keyword search), or None."""
    if len(query) > MAX_QUERY_CHARS:
        return (f"the query is {len(query):,} characters; a search takes up to {MAX_QUERY_CHARS:,} characters and "
                f"{MAX_QUERY_TERMS} distinct words: search with the words that matter")
    terms = len(set(_WORD.findall(query.lower())))
    if terms > MAX_QUERY_TERMS:
        return (f"the query has {terms:,} distinct words; a search takes up to {MAX_QUERY_TERMS} (each is a search "
                "term): search with the words that matter")
    return None


def clipped_query(query: str) -> str:
    """``query`` within the caps: its first ``MAX_QUERY_CHARS`` characters, and of those the words up to the
    ``MAX_QUERY_TERMS``th distinct one (a long message searched as a file_search query)."""
    query = query[:MAX_QUERY_CHARS]
    seen: set[str] = set()
    for m in _WORD.finditer(query):
        seen.add(m.group().lower())
        if len(seen) > MAX_QUERY_TERMS:
            return query[:m.start()]
    return query
