"""The pairing routes of a server that shares (``fireside serve --share``).

On the shared listener (TLS, paired devices' tokens only) ``/fireside/pair/start`` and
``/fireside/pair/finish`` are the only paths open without a token: they run the PAKE exchange of
``devices/pairing.py`` against the code the user opened, and ``/fireside/lend`` (a paired device's token
only) says what memory this device lends, when it does (``rpc/``). On the loopback listener,
``/fireside/pair/code`` opens a code (under the loopback's own rules: its API key, if one is set) for
``fireside devices code`` to show; the shared listener never answers it, so nobody on the network
can open a code. Every answer is JSON; a refusal is a 403 that says why (a wrong code says how many
tries are left). The exchange's work (an Ed25519 scalar multiplication, a keyring write) runs on a
worker thread.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from ..devices import FINISH_PATH, START_PATH, show_code
from ..errors import DeviceError
from ..rpc import LEND_PATH
from .context import ServerContext, context
from .errors import ApiError

router = APIRouter(include_in_schema=False)
CODE_PATH = "/fireside/pair/code"
PAIRING_PATHS = (START_PATH, FINISH_PATH)


class StartBody(BaseModel):
    name: str
    fingerprint: str
    message: str


class FinishBody(BaseModel):
    session: str
    confirm: str


def _desk(ctx: ServerContext, shared: bool):
    if ctx.pairing is None or ctx.shared != shared:
        raise ApiError("this server is not sharing: start it with `fireside serve --share`", 404, "not_sharing")
    return ctx.pairing


async def _refused(fn, *args) -> dict:
    try:
        return await run_in_threadpool(fn, *args)
    except DeviceError as exc:
        raise ApiError(str(exc), 403, "pairing_refused") from None


@router.post(CODE_PATH)
async def open_code(request: Request) -> dict:
    code, valid_s = _desk(context(request), shared=False).open_code()
    return {"code": show_code(code), "valid_s": valid_s, "tries": context(request).pairing.max_tries}


@router.post(START_PATH)
async def start(body: StartBody, request: Request) -> dict:
    return await _refused(_desk(context(request), shared=True).start, body.name, body.fingerprint, body.message)


@router.post(FINISH_PATH)
async def finish(body: FinishBody, request: Request) -> dict:
    return await _refused(_desk(context(request), shared=True).finish, body.session, body.confirm)


@router.get(LEND_PATH)
async def lend(request: Request) -> dict:
    """What this device lends a paired one (``rpc/``): its free memory under the cap; 404 when it lends none."""
    lender = getattr(request.app.state, "lender", None)
    if lender is None:
        raise ApiError("this device lends no memory: start it with `fireside serve --share --lend GIB`", 404,
                       "not_lending")
    return await run_in_threadpool(lender.offer)
