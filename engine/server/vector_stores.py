"""OpenAI's vector stores over the engine's knowledge collections (``documents/collections.py``): a
vector store is a collection, its files are the collection's members, and its index is an SQLite file
in the data folder, so stores outlive a restart.

Routes: ``/v1/vector_stores`` create (with ``file_ids``), list, retrieve, update (name, metadata),
delete; ``/{id}/files`` add, list (``filter`` by status), retrieve, delete; ``/{id}/file_batches`` create,
retrieve, list its files, cancel; ``/{id}/search``. Adding a file answers at once with ``in_progress``;
the collections' worker thread indexes it and the file becomes ``completed``, or ``failed`` with
``last_error`` (``invalid_file``, ``unsupported_file``, ``server_error``). Responses carry
``openai-poll-after-ms`` so the SDK's ``*_and_poll`` helpers ask again soon.

Not honoured: ``chunking_strategy`` (passages follow the document's structure, ``documents/chunking.py``;
accepted and answered as ``{"type": "other"}``), ``expires_after`` (kept as given; stores never expire),
search ``ranking_options`` and ``rewrite_query`` (accepted, no effect). Search ``filters`` and
file ``attributes`` filtering are refused (400): a filter that silently did nothing would return
passages the caller asked to exclude.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse

from ..documents import Collection, Member, Passage, query_over
from .context import context
from .errors import ApiError
from .outbound import cursor_page
from .validation import Body

router = APIRouter(prefix="/v1", tags=["OpenAI vector stores"])
POLL_AFTER_MS = "250"  # the SDK's create_and_poll waits this long between looks (its default is 1 s)
Order = Literal["asc", "desc"]
Limit = Annotated[int, Query(ge=1, le=100)]
Status = Literal["in_progress", "completed", "failed", "cancelled"]


class StoreBody(Body):
    name: str | None = None
    file_ids: list[str] = Field(default_factory=list, max_length=500)
    metadata: dict[str, str] | None = None
    expires_after: dict[str, Any] | None = None
    chunking_strategy: dict[str, Any] | None = None
    description: str | None = None


class FileBody(Body):
    file_id: str
    attributes: dict[str, str | float | bool] | None = None
    chunking_strategy: dict[str, Any] | None = None


class BatchBody(Body):
    file_ids: list[str] = Field(min_length=1, max_length=500)


class SearchBody(Body):
    query: str | list[str]
    max_num_results: Annotated[int, Field(ge=1, le=50)] = 10
    filters: dict[str, Any] | None = None
    ranking_options: dict[str, Any] | None = None
    rewrite_query: bool = False


def store_object(c: Collection, expires_after: dict | None = None) -> dict:
    counts = {k: c.counts.get(k, 0) for k in ("in_progress", "completed", "failed", "cancelled", "total")}
    return {"id": c.id, "object": "vector_store", "created_at": c.created_at, "name": c.name, "usage_bytes": c.usage_bytes,
            "file_counts": counts, "status": c.status, "expires_after": expires_after, "expires_at": None,
            "last_active_at": c.last_active_at, "metadata": c.metadata}


def file_object(m: Member) -> dict:
    error = {"code": m.error_code, "message": m.error_message} if m.status == "failed" else None
    return {"id": m.file_id, "object": "vector_store.file", "usage_bytes": m.usage_bytes, "created_at": m.created_at,
            "vector_store_id": m.collection_id, "status": m.status, "last_error": error,
            "chunking_strategy": {"type": "other"}, "attributes": {}}


def batch_object(collection_id: str, batch_id: str, members: list[Member]) -> dict:
    counts = {s: sum(m.status == s for m in members) for s in ("in_progress", "completed", "failed", "cancelled")}
    status = "in_progress" if counts["in_progress"] else "cancelled" if counts["cancelled"] else "completed"
    return {"id": batch_id, "object": "vector_store.files_batch", "vector_store_id": collection_id, "status": status,
            "created_at": min((m.created_at for m in members), default=0), "file_counts": {**counts, "total": len(members)}}


def result_object(p: Passage) -> dict:
    return {"file_id": p.file_id, "filename": p.filename, "score": p.score, "attributes": {},
            "content": [{"type": "text", "text": p.text}]}


def polled(body: dict) -> JSONResponse:
    return JSONResponse(body, headers={"openai-poll-after-ms": POLL_AFTER_MS})


def refuse_filters(filters: dict | None) -> None:
    if filters:
        raise ApiError("filters: attribute filters are not supported here; leave them out to search every file",
                       param="filters")


@router.post("/vector_stores")
async def create_store(request: Request, body: StoreBody) -> JSONResponse:
    collections = context(request).collections
    created = await run_in_threadpool(collections.create, body.name or "", body.file_ids, body.metadata)
    return polled(store_object(created, body.expires_after))


@router.get("/vector_stores")
async def list_stores(request: Request, limit: Limit = 20, order: Order = "desc", after: str | None = None,
                      before: str | None = None) -> dict:
    stores = await run_in_threadpool(context(request).collections.list)
    return cursor_page([store_object(s) for s in stores], limit, order, after, before)


@router.get("/vector_stores/{store_id}")
async def retrieve_store(request: Request, store_id: str) -> JSONResponse:
    return polled(store_object(await run_in_threadpool(context(request).collections.get, store_id)))


@router.post("/vector_stores/{store_id}")
async def update_store(request: Request, store_id: str, body: StoreBody) -> dict:
    collections = context(request).collections
    return store_object(await run_in_threadpool(collections.update, store_id, body.name, body.metadata))


@router.delete("/vector_stores/{store_id}")
async def delete_store(request: Request, store_id: str) -> dict:
    await run_in_threadpool(context(request).collections.delete, store_id)
    return {"id": store_id, "object": "vector_store.deleted", "deleted": True}


@router.post("/vector_stores/{store_id}/files")
async def add_file(request: Request, store_id: str, body: FileBody) -> JSONResponse:
    member = await run_in_threadpool(context(request).collections.add, store_id, body.file_id)
    return polled(file_object(member))


@router.get("/vector_stores/{store_id}/files")
async def list_files(request: Request, store_id: str, limit: Limit = 20, order: Order = "desc",
                     after: str | None = None, before: str | None = None, filter: Status | None = None) -> dict:
    members = await run_in_threadpool(context(request).collections.members, store_id, filter)
    return cursor_page([file_object(m) for m in members], limit, order, after, before)


@router.get("/vector_stores/{store_id}/files/{file_id}")
async def retrieve_file(request: Request, store_id: str, file_id: str) -> JSONResponse:
    return polled(file_object(await run_in_threadpool(context(request).collections.member, store_id, file_id)))


@router.delete("/vector_stores/{store_id}/files/{file_id}")
async def remove_file(request: Request, store_id: str, file_id: str) -> dict:
    await run_in_threadpool(context(request).collections.remove, store_id, file_id)
    return {"id": file_id, "object": "vector_store.file.deleted", "deleted": True}


@router.post("/vector_stores/{store_id}/file_batches")
async def create_batch(request: Request, store_id: str, body: BatchBody) -> JSONResponse:
    collections = context(request).collections
    batch_id = await run_in_threadpool(collections.add_batch, store_id, body.file_ids)
    return await _batch(collections, store_id, batch_id)


@router.get("/vector_stores/{store_id}/file_batches/{batch_id}")
async def retrieve_batch(request: Request, store_id: str, batch_id: str) -> JSONResponse:
    return await _batch(context(request).collections, store_id, batch_id)


@router.post("/vector_stores/{store_id}/file_batches/{batch_id}/cancel")
async def cancel_batch(request: Request, store_id: str, batch_id: str) -> JSONResponse:
    collections = context(request).collections
    await _batch(collections, store_id, batch_id)
    await run_in_threadpool(collections.cancel_batch, store_id, batch_id)
    return await _batch(collections, store_id, batch_id)


@router.get("/vector_stores/{store_id}/file_batches/{batch_id}/files")
async def list_batch_files(request: Request, store_id: str, batch_id: str, limit: Limit = 20, order: Order = "desc",
                           after: str | None = None, before: str | None = None, filter: Status | None = None) -> dict:
    collections = context(request).collections
    await _batch(collections, store_id, batch_id)  # an unknown batch is a 404, as the batch itself is
    members = await run_in_threadpool(collections.members, store_id, filter, batch_id)
    return cursor_page([file_object(m) for m in members], limit, order, after, before)


async def _batch(collections, store_id: str, batch_id: str) -> JSONResponse:
    members = await run_in_threadpool(collections.members, store_id, None, batch_id)
    if not members:
        raise ApiError(f"no file batch {batch_id!r} in vector store {store_id!r}", 404, "not_found", "batch_id")
    return polled(batch_object(store_id, batch_id, members))


@router.post("/vector_stores/{store_id}/search")
async def search_store(request: Request, store_id: str, body: SearchBody) -> dict:
    refuse_filters(body.filters)
    queries = [body.query] if isinstance(body.query, str) else body.query
    if not any(q.strip() for q in queries):
        raise ApiError("query: give some words to search for", param="query")
    if why := query_over(" ".join(queries)):  # refused before any index is read
        raise ApiError(f"query: {why}", param="query")
    passages = await run_in_threadpool(context(request).collections.search, [store_id], " ".join(queries),
                                       body.max_num_results)
    return {"object": "vector_store.search_results.page", "search_query": queries,
            "data": [result_object(p) for p in passages], "has_more": False, "next_page": None}
