"""The Responses API's ``file_search`` tool, run here rather than by the model: before the reply, the
user's last message is searched in the named vector stores (``Collections.search``), the passages found
go into that message as numbered sources with the ask to cite them as ``[n]`` (``documents/sources.py``),
and the response gets a ``file_search_call`` output item (its ``results`` only with
``include: ["file_search_call.results"]``, as OpenAI sends them) before the message. The message's
``[n]`` markers are cut from its text and become ``file_citation`` annotations (``file_id``,
``filename``, ``index``: where in the text the marker stood), as OpenAI's text carries none either.

Differences from OpenAI, said in docs/api.md: the search runs on every request that has the tool
(OpenAI's model decides whether to call it; here ``tool_choice: "none"`` skips it), with the user's
words as the one query (no rewriting); and a reply that cites no source by number still gets one
``file_citation`` per file its passages came from, at the end of its text. OpenAI's models cite, and
its replies without markers carry no annotations; a small local model often answers from the sources
without writing a marker, and its reader should still see where the answer came from (the app lists a
reply's sources the same way). ``max_num_results`` defaults to 5,
not OpenAI's 10 or 20, since a local model's context is small. ``filters`` are refused (400). A message
longer than the model's context could hold is refused (400) before any store is searched, and a long
message is searched by its first 256 distinct words (``documents/limits.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from ..documents import Passage, clipped_query, grounded_prompt
from .context import context, new_id
from .errors import ApiError
from .inbound import text_of

RESULTS = "file_search_call.results"  # the ``include`` value that puts the passages in the call item
DEFAULT_RESULTS = 5


@dataclass
class FileSearch:
    """One request's search: the call item's id, the query, the passages (numbered from 1 in the prompt)."""

    id: str
    queries: list[str]
    passages: list[Passage]
    with_results: bool

    def item(self, status: str = "completed") -> dict[str, Any]:
        results = None
        if self.with_results and status == "completed":
            results = [{"file_id": p.file_id, "filename": p.filename, "score": p.score, "text": p.text,
                        "attributes": {}} for p in self.passages]
        return {"type": "file_search_call", "id": self.id, "status": status, "queries": self.queries,
                "results": results}

    def annotations(self, citations: list[tuple[int, int]], end: int) -> list[dict[str, Any]]:
        """``file_citation`` annotations for the ``(n, index)`` citations, one per source and place; when
        the reply cited none, one per file its passages came from, at its ``end``."""
        if not citations:
            citations = [(n, end) for n, p in enumerate(self.passages, 1)
                         if p.file_id not in {q.file_id for q in self.passages[:n - 1]}]
        out = []
        for n, index in dict.fromkeys(citations):
            p = self.passages[n - 1]
            out.append({"type": "file_citation", "file_id": p.file_id, "filename": p.filename, "index": index})
        return out


def search_tool(tools: list[Any] | None) -> Any | None:
    """The request's one ``file_search`` tool, checked; None when it has none."""
    found = [t for t in tools or [] if t.type == "file_search"]
    if not found:
        return None
    if len(found) > 1:
        raise ApiError("tools: give one file_search tool (list every vector store in its vector_store_ids)",
                       param="tools")
    tool = found[0]
    if not tool.vector_store_ids:
        raise ApiError("tools: a file_search tool needs vector_store_ids", param="tools")
    if tool.filters:
        raise ApiError("tools: file_search filters are not supported here; leave them out to search every file",
                       param="tools")
    return tool


async def run_search(request: Request, tool: Any, messages: list[dict[str, Any]], include: list[str] | None,
                     model: str | None = None) -> tuple[FileSearch, list[dict[str, Any]]]:
    """The search for the last user message, and the messages with the sources put into it. With ``model``,
    a message too long for that model's context is refused first (``fits``), before any store is read."""
    last = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=None)
    message = text_of(_texts(messages[last]["content"])) if last is not None else ""
    k = tool.max_num_results or DEFAULT_RESULTS
    ctx = context(request)
    if ctx.collections is None:  # the shared listener: a paired device uses this machine's models, not its files
        raise ApiError("tools: file_search is not offered to paired devices (this machine's documents stay on it); "
                       "search a vector store on your own device", param="tools")
    if model is not None:
        await fits(request, model, message)
    query = clipped_query(message)  # a long message is searched by its first words (the caps: documents/limits.py)
    passages = await run_in_threadpool(ctx.collections.search, tool.vector_store_ids, query, k) \
        if query.strip() else []
    search = FileSearch(new_id("fs_"), [query] if query.strip() else [], passages, RESULTS in (include or []))
    if passages:
        messages = list(messages)
        messages[last] = _grounded(messages[last], query, passages)
    return search, messages


async def fits(request: Request, model: str, message: str) -> None:
    """A 400 when ``message`` alone is longer than ``model``'s context could hold (``Runtime.prompt_cap``):
    the reply could never be made, so its stores are not searched (a 1 MB message was searched for 17 s,
    then refused). A remote model's cap is not known here: its engine answers for it."""
    ctx = context(request)
    model_id = await ctx.model_for(model)
    cap = await run_in_threadpool(ctx.engine.prompt_cap, model_id)
    if cap and len(message) > cap:
        raise ApiError(f"{model_id}: the message to search and answer is {len(message):,} characters, and its "
                       f"context holds at most {cap:,} characters of this model's text; send a shorter message",
                       code="context_length_exceeded", param="input")


def _texts(content: Any) -> Any:
    """The text parts of a user message's content (images left out of the query)."""
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return content


def _grounded(message: dict[str, Any], query: str, passages: list[Passage]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, list):  # images stay; the text becomes the grounded prompt
        others = [p for p in content if not (isinstance(p, dict) and p.get("type") == "text")]
        return dict(message, content=[{"type": "text", "text": grounded_prompt(query, passages)}, *others])
    return dict(message, content=grounded_prompt(query, passages))

