"""``POST /fireside/load``: load (or reload) a model with load options, as ``fireside run``'s flags do.

Every other route loads a model on its first request with the server's load options (``fireside serve
--ctx ... --with ...``), once, for every client. This route lets a client choose them for one model:
``{"model": "starter", "options": {"with_devices": ["desk"], "context": 8192}}`` places layers on the
paired device ``desk`` (``rpc/``), and later requests for that model use what was loaded. The option
names are ``LoadOptions``' own; an unknown one, or one of the wrong type, is a 400 naming it. The answer
is what loaded: the context, the slots, and where the layers went. Loopback listener only: a paired
device never chooses how this machine loads its models.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from ..errors import DeviceError
from ..models import LoadOptions, device_names
from .context import context
from .errors import ApiError

router = APIRouter(include_in_schema=True)
LOAD_PATH = "/fireside/load"
_OPTIONS = TypeAdapter(LoadOptions)


class LoadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str
    options: dict[str, Any] = {}


def load_options(given: dict[str, Any]) -> LoadOptions:
    """``LoadOptions`` from a request's JSON; ``ApiError`` (400) naming an unknown or mistyped option."""
    unknown = sorted(set(given) - set(LoadOptions.__dataclass_fields__))
    if unknown:
        raise ApiError(f"unknown load option {unknown[0]!r} (the options are {', '.join(sorted(LoadOptions.__dataclass_fields__))})",
                       400, "invalid_load_option", f"options.{unknown[0]}")
    if isinstance(given.get("with_devices"), str):
        given = {**given, "with_devices": device_names(given["with_devices"])}
    try:
        return _OPTIONS.validate_python({k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(f"load option {where!r}: {first['msg']}", 400, "invalid_load_option", f"options.{where}") from None


@router.post(LOAD_PATH)
async def load(body: LoadBody, request: Request) -> dict:
    ctx = context(request)
    options = load_options(body.options)
    model_id = await run_in_threadpool(ctx.resolve, body.model)
    if ctx.engine.is_remote(model_id):
        raise ApiError(f"{body.model} is another machine's model: it loads there, with its own options", 400,
                       "remote_model")
    try:
        loaded = await run_in_threadpool(ctx.engine.load, model_id, options)
    except DeviceError as exc:
        raise ApiError(str(exc), 400, "device_error") from None
    split = {name.split()[0]: mib for name, mib in loaded.reported_buffers.items() if name.endswith(" model")}
    return {"model": loaded.model_id, "n_ctx": loaded.n_ctx, "parallel": loaded.parallel,
            "gpu_layers": loaded.n_gpu_layers, "layers": loaded.n_layers + 1, "verdict": loaded.verdict,
            "model_buffers_mib": split, "notes": loaded.notes, "warnings": loaded.warnings}
