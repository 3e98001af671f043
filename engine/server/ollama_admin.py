"""Ollama's model-management routes: ``/api/tags``, ``/api/ps``, ``/api/show``, ``/api/pull`` and
``DELETE /api/delete``, all answered from the model library and the runtime.

Pull and delete change what is on disk, so they are off unless the server was started with them on
(``SecurityPolicy.allow_management``, ``fireside serve --allow-management``), and then need the API key
whenever one is set (the security middleware checks both). A delete the library refuses (the starter
model) changes nothing: the model is removed first and unloaded only once it is gone. ``/api/pull`` streams progress as NDJSON
status lines sampled by the downloader (about ten a second); a client that hangs up cancels the
download, which keeps its part file for a later resume.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from .context import ServerContext, context
from .errors import ApiError, describe, error_body
from .streaming import collect, stream
from .validation import Body, Name

admin_router = APIRouter()
_DONE = object()
NEVER = "2318-07-19T00:00:00Z"  # what Ollama shows for a model kept loaded for ever


class NameBody(Body):
    model: Name | None = None
    name: Name | None = None  # older clients send "name"
    stream: bool = True

    @property
    def ref(self) -> str:
        ref = self.model or self.name
        if not ref:
            raise ApiError("model is required")
        return ref


def details(model: Any) -> dict:
    info = model.info
    params = info.parameter_count
    size = f"{params / 1e9:.1f}B" if params >= 1e9 else f"{params / 1e6:.0f}M"
    return {"parent_model": "", "format": "gguf", "family": info.architecture, "families": [info.architecture],
            "parameter_size": size, "quantization_level": model.quant}


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts or 0))


def tag(model: Any) -> dict:
    return {"name": model.id, "model": model.id, "modified_at": _iso(model.added_at), "size": model.size,
            "digest": model.sha256 or "", "details": details(model)}


@admin_router.get("/tags")
async def tags(request: Request) -> dict:
    models = await run_in_threadpool(context(request).models)
    return {"models": [tag(m) for m in models]}


@admin_router.get("/ps")
async def ps(request: Request) -> dict:
    ctx = context(request)
    by_id = {m.id: m for m in await run_in_threadpool(ctx.models)}
    out, seen = [], set()
    for loaded in sorted(ctx.engine.loaded(), key=lambda m: m.embedding):
        if loaded.model_id in seen:  # a model's embedding runner is the same model to a client
            continue
        seen.add(loaded.model_id)
        model = by_id.get(loaded.model_id)
        entry = tag(model) if model else {"name": loaded.model_id, "model": loaded.model_id, "digest": ""}
        entry.update(size=loaded.planned_ram_bytes + loaded.planned_gpu_bytes, size_vram=loaded.planned_gpu_bytes,
                     context_length=loaded.n_ctx, expires_at=expires_at(ctx, loaded),
                     threads=loaded.threads_label(),  # Fireside's own: the threads in use (`fireside ps`)
                     draft=loaded.draft)  # and the draft model drafting for it (speculative decoding), if any
        out.append(entry)
    return {"models": out}


def expires_at(ctx: ServerContext, loaded: Any) -> str:
    """When the runtime unloads an idle model: its last use plus the time-to-live it holds now (the
    last request's ``keep_alive``, else the server's); a ttl of 0 means never."""
    ttl = ctx.engine.ttl(loaded.model_id)
    ttl = ctx.engine.idle_ttl_s if ttl is None else ttl
    return NEVER if ttl <= 0 else _iso(loaded.last_used + ttl)


@admin_router.post("/show")
async def show(body: NameBody, request: Request) -> dict:
    ctx = context(request)
    model = await run_in_threadpool(ctx.entry, body.ref)
    info = model.info
    if info.embeds_only:
        caps = ["embedding"]
    else:
        caps = ["completion"] + (["tools"] if info.chat_template and "tool" in info.chat_template else []) \
            + (["vision"] if model.projector else [])
    meta = {k: v for k, v in info.metadata.items() if isinstance(v, (str, int, float, bool))}
    return {"modelfile": f"FROM {model.id}\n", "parameters": "", "template": info.chat_template or "",
            "details": details(model), "model_info": meta, "capabilities": caps,
            "modified_at": _iso(model.added_at)}


@admin_router.delete("/delete")
async def delete(body: NameBody, request: Request) -> Response:
    ctx = context(request)
    model_id = await run_in_threadpool(ctx.resolve, body.ref)
    await run_in_threadpool(remove, ctx, model_id)
    return Response(status_code=200)


def remove(ctx: ServerContext, model_id: str) -> None:
    """Remove from the library first, so a refusal leaves the model loaded and its replies running;
    unload after. Where an open file cannot be deleted (Windows), unload and try once more."""
    try:
        ctx.library.remove(model_id)
    except OSError:
        ctx.engine.unload(model_id)
        ctx.library.remove(model_id)
    finally:
        ctx.forget_names()
    ctx.engine.unload(model_id)


@admin_router.post("/pull")
async def pull(body: NameBody, request: Request):
    ctx = context(request)
    name = body.ref
    if ctx.puller is None:
        raise ApiError("this server cannot download models", 501)

    def source(cancel: threading.Event):
        return pull_events(ctx, name, cancel)

    if body.stream:
        return await stream(request, source, PullEncoder(), "application/x-ndjson")
    await collect(request, source)
    return {"status": "success"}


def pull_events(ctx: ServerContext, name: str, cancel: threading.Event):
    """Run the puller on a helper thread and yield its progress as Ollama status objects."""
    events: queue.Queue = queue.Queue()

    def on_progress(p: Any) -> None:
        events.put({"status": f"pulling {p.filename}", "digest": p.filename, "total": p.total,
                    "completed": p.done})

    def work() -> None:
        try:
            model = ctx.puller(name, on_progress=on_progress, cancel=cancel)
            ctx.forget_names()  # a new model can take an alias another had
            events.put({"status": "verifying sha256 digest"})
            events.put({"status": "success", "model": getattr(model, "id", name)})
        except BaseException as exc:
            events.put(exc)
        finally:
            events.put(_DONE)

    yield {"status": "pulling manifest"}
    threading.Thread(target=work, name="fireside-server-pull", daemon=True).start()
    while (item := events.get()) is not _DONE:
        if isinstance(item, BaseException):
            raise item
        yield item


class PullEncoder:
    def start(self) -> list[bytes]:
        return []

    def chunk(self, item: dict) -> list[bytes]:
        return [(json.dumps(item) + "\n").encode("utf-8")]

    def error(self, exc: BaseException) -> list[bytes]:
        return [(json.dumps(error_body("ollama", describe(exc))) + "\n").encode("utf-8")]

    def end(self) -> list[bytes]:
        return []
