"""Every error the server sends, mapped in one place: engine exceptions to HTTP statuses, and each
status to the error shape the caller's dialect expects.

OpenAI clients read ``{"error": {"message", "type", "param", "code"}}``, Ollama clients read
``{"error": "..."}`` and Anthropic clients read ``{"type": "error", "error": {"type", "message"}}``.
The dialect follows from the path (``/api/...`` is Ollama, ``/v1/messages...`` is Anthropic, the rest
OpenAI), so the security middleware, FastAPI's validation errors and the engine's errors all answer
in the shape the client can parse. Mid-stream failures reuse ``describe`` to build the error event.
Every error response carries the headers that tell an SDK whether to retry (``error_headers``): a 503
says when (``Retry-After``); a 4xx that the same request would meet again (a bad body, a wrong key, an
unknown model) says ``x-should-retry: false``, which the OpenAI and Anthropic SDKs obey, so an agent
shows the message at once instead of retrying for minutes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    ContextOverflow,
    DeviceGone,
    DocumentNotFound,
    DocumentRejected,
    EmbedsOnly,
    FiresideError,
    GatedRepo,
    GrammarDeadEnd,
    GrammarRejected,
    HubError,
    ImageRejected,
    LibraryError,
    LoadCancelled,
    ModelNotFound,
    ModelTooLarge,
    NoVision,
    QueueFull,
    RemoteError,
    RemoteUnsupported,
    ReplyCut,
    RunnerCrashed,
    SchemaMismatch,
    TemplateError,
    UnsafePath,
)

log = logging.getLogger(__name__)
RETRY_AFTER_S = 2
RETRYABLE_4XX = frozenset({408, 409, 429})  # a timeout, a conflict, a rate limit: a later try can succeed


class ApiError(Exception):
    """A client mistake the dialect layer found (a bad field, an unknown tool): a 4xx in the right shape."""

    def __init__(self, message: str, status: int = 400, code: str | None = None, param: str | None = None):
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


@dataclass
class Problem:
    """What went wrong, in HTTP terms: the status, OpenAI's type and code, and a message for a person."""

    status: int
    type: str
    message: str
    code: str | None = None
    param: str | None = None


# Most specific first: the first isinstance match wins.
_ENGINE_ERRORS: list[tuple[type[Exception], int, str, str | None]] = [
    (UnsafePath, 404, "invalid_request_error", "model_not_found"),
    (ModelNotFound, 404, "invalid_request_error", "model_not_found"),
    (DocumentNotFound, 404, "invalid_request_error", "not_found"),  # a file or vector store id
    (DocumentRejected, 400, "invalid_request_error", "invalid_file"),  # an upload refused: the message says why
    (ContextOverflow, 400, "invalid_request_error", "context_length_exceeded"),
    (GrammarRejected, 400, "invalid_request_error", "grammar_rejected"),
    (ImageRejected, 400, "invalid_request_error", "invalid_image"),
    (NoVision, 400, "invalid_request_error", "model_cannot_see_images"),
    (EmbedsOnly, 400, "invalid_request_error", "model_embeds_only"),
    # the request's own grammar cannot go on with this model: a retry would end the same way, so a 4xx
    # before the first token; once a stream has started, the same code in its error event
    (GrammarDeadEnd, 400, "invalid_request_error", "grammar_dead_end"),
    (SchemaMismatch, 500, "server_error", "reply_schema_mismatch"),
    (QueueFull, 503, "server_error", "queue_full"),
    (DeviceGone, 502, "server_error", "device_gone"),  # a paired device holding layers went away
    (RunnerCrashed, 500, "server_error", "runner_crashed"),
    (ReplyCut, 503, "server_error", "reply_cut"),
    (LoadCancelled, 503, "server_error", "load_cancelled"),
    (ModelTooLarge, 507, "server_error", "model_too_large"),
    # a template fails the same way every time: a 5xx would only make SDKs send it three more times
    (TemplateError, 400, "invalid_request_error", "template_error"),
    (RemoteUnsupported, 400, "invalid_request_error", "unsupported_by_remote"),
    (RemoteError, 502, "server_error", "remote_error"),
    (GatedRepo, 403, "permission_error", "gated_repo"),
    (HubError, 502, "server_error", "hub_error"),
    (LibraryError, 400, "invalid_request_error", "library_error"),
    (FiresideError, 500, "server_error", "runtime_error"),
]

_STATUS_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                 404: "not_found_error", 413: "request_too_large", 415: "invalid_request_error",
                 429: "rate_limit_error", 503: "overloaded_error"}


def describe(exc: BaseException) -> Problem:
    """The HTTP meaning of any exception a handler or a stream can raise."""
    if isinstance(exc, ApiError):
        return Problem(exc.status, _STATUS_TYPES.get(exc.status, "invalid_request_error"), str(exc),
                       exc.code, exc.param)
    for kind, status, type_, code in _ENGINE_ERRORS:
        if isinstance(exc, kind):
            return Problem(status, type_, str(exc), code, getattr(exc, "param", None))
    log.exception("unexpected error while serving a request", exc_info=exc)
    return Problem(500, "server_error", f"internal error: {type(exc).__name__}: {exc}", "internal_error")


def dialect_of(path: str) -> str:
    if path.startswith("/api/"):
        return "ollama"
    if path.startswith("/v1/messages"):
        return "anthropic"
    return "openai"


def error_body(dialect: str, problem: Problem) -> dict:
    """The JSON body a client of ``dialect`` expects for ``problem``."""
    if dialect == "ollama":
        return {"error": problem.message}
    if dialect == "anthropic":
        kind = _STATUS_TYPES.get(problem.status, "api_error")
        if problem.status == 400 or problem.status == 415:
            kind = "invalid_request_error"
        return {"type": "error", "error": {"type": kind, "message": problem.message}}
    return {"error": {"message": problem.message, "type": problem.type, "param": problem.param,
                      "code": problem.code}}


def error_headers(status: int) -> dict[str, str]:
    """The retry advice an error with ``status`` carries (see the module docstring)."""
    if status == 503:
        return {"Retry-After": str(RETRY_AFTER_S)}
    if 400 <= status < 500 and status not in RETRYABLE_4XX:
        return {"x-should-retry": "false"}
    return {}


def error_response(path: str, problem: Problem) -> JSONResponse:
    return JSONResponse(error_body(dialect_of(path), problem), status_code=problem.status,
                        headers=error_headers(problem.status))


def status_problem(status: int, message: str, code: str | None = None) -> Problem:
    return Problem(status, _STATUS_TYPES.get(status, "invalid_request_error"), message, code)


# Pydantic names the member of a union that failed (``str``, ``list[str]``, ``function-after[...]``):
# not a field a client sent, so left out of the path.
_TYPE_TAGS = {"str", "int", "float", "bool", "dict", "list", "none", "nullable"}


def validation_problem(errors: list[dict]) -> Problem:
    """A 400 naming the first bad field (``options.temperature``) and what is wrong with it."""
    # A union reports one error per member; the deepest names the field the client got wrong.
    first = max(errors, key=lambda e: len(e.get("loc", ())), default={})
    loc = [p for p in first.get("loc", ()) if p != "body"]
    where = ".".join(str(p) for p in loc if isinstance(p, int) or (p not in _TYPE_TAGS and p.isidentifier()))
    msg = first.get("msg", "invalid request")
    if first.get("type") == "json_invalid":
        where, msg = "", f"the body is not valid JSON: {(first.get('ctx') or {}).get('error', msg)}"
    elif not where:
        msg = f"the body must be a JSON object: {msg}"
    return Problem(400, "invalid_request_error", f"{where}: {msg}" if where else msg, "invalid_request",
                   where or None)


def install(app: FastAPI) -> None:
    """Route every exception the app can raise through ``describe`` and the caller's dialect."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request.url.path, describe(exc))

    async def on_validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(request.url.path, validation_problem(exc.errors()))

    async def on_http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(request.url.path, status_problem(exc.status_code, str(exc.detail)))

    app.add_exception_handler(FiresideError, on_error)
    app.add_exception_handler(ApiError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_error)  # a bug still answers in the dialect's shape (logged)
