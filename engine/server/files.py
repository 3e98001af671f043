"""OpenAI's Files API for file search: ``/v1/files`` upload (multipart, ``purpose`` ``assistants`` or
``user_data``), list, retrieve, read back (``/content``) and delete, over the engine's ``Uploads``
(``documents/uploads.py``: the files live in the data folder's ``knowledge/files``).

An upload streams to disk (the security middleware caps it at ``max_upload_bytes`` and lets only this
route take a multipart body); ``Uploads.save`` then refuses, with a 400 that says why, an empty file, a
kind no reader takes, a file over its reader's cap, or one whose first bytes are not what its name says.
Deleting a file takes it out of every vector store too, as OpenAI does. Every call that touches the
disk runs on a worker thread, never the event loop.
"""

from __future__ import annotations

import mimetypes
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.responses import FileResponse

from ..documents import StoredFile
from .context import context
from .errors import ApiError
from .outbound import cursor_page

router = APIRouter(prefix="/v1", tags=["OpenAI files"])
PURPOSES = ("assistants", "user_data")
Order = Literal["asc", "desc"]


def file_object(stored: StoredFile) -> dict:
    return {"id": stored.id, "object": "file", "bytes": stored.bytes, "created_at": stored.created_at,
            "filename": stored.filename, "purpose": stored.purpose, "status": "processed", "expires_at": None,
            "status_details": None}


@router.post("/files")
async def upload_file(request: Request) -> dict:
    uploads = context(request).collections.uploads
    async with request.form(max_files=1, max_fields=8) as form:
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, UploadFile):
            raise ApiError("file: send the file as multipart/form-data, in a part named 'file' with a file name",
                           param="file")
        if purpose not in PURPOSES:
            raise ApiError(f"purpose: must be one of {', '.join(PURPOSES)} (files here are for file search), "
                           f"not {purpose!r}", param="purpose")
        stored = await run_in_threadpool(uploads.save, upload.file, upload.filename, purpose)
    return file_object(stored)


@router.get("/files")
async def list_files(request: Request, purpose: str | None = None, order: Order = "desc",
                     limit: Annotated[int, Query(ge=1, le=10000)] = 10000, after: str | None = None) -> dict:
    files = await run_in_threadpool(context(request).collections.uploads.list, purpose)
    return cursor_page([file_object(f) for f in files], limit, order, after)


@router.get("/files/{file_id}")
async def retrieve_file(request: Request, file_id: str) -> dict:
    return file_object(await run_in_threadpool(context(request).collections.uploads.get, file_id))


@router.get("/files/{file_id}/content")
async def file_content(request: Request, file_id: str) -> FileResponse:
    stored = await run_in_threadpool(context(request).collections.uploads.get, file_id)
    media_type = mimetypes.guess_type(stored.filename)[0] or "application/octet-stream"
    return FileResponse(stored.path, media_type=media_type, filename=stored.filename)


@router.delete("/files/{file_id}")
async def delete_file(request: Request, file_id: str) -> dict:
    await run_in_threadpool(context(request).collections.delete_file, file_id)
    return {"id": file_id, "object": "file", "deleted": True}
