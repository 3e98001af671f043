"""The app factory: ``create_app`` builds the ASGI app from injected objects, with no module globals.

The engine, settings, library and security policy are passed in and kept on ``app.state``; the
dialect routers (OpenAI, Ollama, Anthropic) are mounted over them and the security middleware wraps
the whole app, so every request is checked before routing. The desktop app builds one app and runs
it in a ``ServerThread``; ``fireside serve`` does the same in the foreground.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from .. import __version__ as engine_version
from ..devices import PairingDesk
from ..documents import Collections
from ..facade import Engine
from ..rpc import Lender
from ..runtime import Runtime
from ..settings import Settings
from . import anthropic, files, loads, ollama, openai, responses, sharing, vector_stores
from .context import LibraryLike, Puller, ServerContext
from .errors import install as install_errors
from .handler import ArrivalsMiddleware
from .security import SecurityMiddleware, SecurityPolicy, check_bind

log = logging.getLogger(__name__)


def create_app(engine: Engine | Runtime, settings: Settings, library: LibraryLike | None = None, *,
               policy: SecurityPolicy | None = None, puller: Puller | None = None, jit: bool = True,
               pairing: PairingDesk | None = None, shared: bool = False,
               collections: Collections | None = None, lender: Lender | None = None) -> FastAPI:
    """The API server's ASGI app over ``engine`` (a bare ``Runtime`` is wrapped in an ``Engine`` with
    the settings' remote engines, so a tool that only has a runtime still gets remote models).

    ``library`` answers model names (default: ``Library(settings)``); ``policy`` says who may call
    (default: loopback on the settings' host and port, no key); ``puller(name, on_progress, cancel)``
    downloads a model for ``/api/pull`` (default: the hub); ``jit`` loads a model on its first request
    (off: only models already loaded answer). ``pairing`` is the desk of a server that shares
    (``fireside serve --share``): the loopback app opens codes with it, the shared app (``shared``,
    whose policy takes only paired devices' tokens) pairs devices with it; a shared app serves this
    machine's own models only, never its remote engines, other devices or documents; with a ``lender``
    (``rpc/lending.py``) it also lends this machine's memory to paired devices through the RPC tunnel. ``collections`` are the
    uploaded files and vector stores of ``/v1/files`` and ``/v1/vector_stores`` (default: the data
    folder's ``knowledge``, opened on first use, BM25 alone). Safe to call from any thread; the app
    itself runs on uvicorn's event loop.
    """
    engine = Engine.of(engine, settings)
    if library is None:
        library = engine.library()
    policy = policy or SecurityPolicy(bind_host=settings.host, port=settings.port)
    check_bind(policy.bind_host, policy.api_key, devices_only=policy.device_of is not None)
    # The interactive docs (/docs, /redoc) load their scripts, styles and icon from this package, never a
    # CDN: offline they still work, and online opening them tells no outside host. Swagger UI's validator
    # badge would fetch from validator.swagger.io, so it is off.
    app: FastAPI = FastAPIOffline(title="Fireside", version=engine_version, static_url="/docs-assets",
                                  swagger_ui_parameters={"validatorUrl": None},
                                  description="OpenAI, Ollama and Anthropic compatible API over local models.")
    app.state.fireside = ServerContext(engine, settings, library, policy, puller or _hub_puller(settings), jit=jit,
                                       pairing=pairing, shared=shared,
                                       collections=None if shared else collections or Collections(settings.knowledge_dir))
    install_errors(app)
    # a paired device uses this machine's models; its uploaded files and vector stores are not shared
    dialects = (openai, responses, anthropic, ollama, sharing) if shared else \
        (openai, responses, files, vector_stores, anthropic, ollama, sharing, loads)
    for module in dialects:
        app.include_router(module.router)

    @app.get("/", include_in_schema=False)
    async def root() -> dict:
        return {"name": "Fireside", "version": engine_version, "status": "running"}

    app.state.lender = lender if shared else None
    app.add_middleware(SecurityMiddleware, policy=policy, websocket=app.state.lender)
    app.add_middleware(ArrivalsMiddleware, engine=engine)  # outermost: counted before the body is read
    return app


def _hub_puller(settings: Settings) -> Puller:
    def pull(name: str, on_progress=None, cancel=None):
        from ..hub import Hub

        repo_id, _, selector = name.removeprefix("hf.co/").removeprefix("huggingface.co/").partition(":")
        return Hub(settings).pull(repo_id, selector or None, on_progress=on_progress, cancel=cancel)

    return pull
