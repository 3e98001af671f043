"""``fireside serve``: the local API server in the foreground, for headless machines and scripts.

The same app and ``ServerThread`` the desktop app uses, started as one explicit sequence (settings,
library, runtime, app, listening socket) with a log line per step, and stopped in reverse on Ctrl-C
or SIGTERM. The API key is kept in the OS keyring: ``--api-key KEY`` stores it, ``--new-key`` makes
and stores a random one (printed once), ``--forget-key`` removes it. Listening on anything but
loopback without a key is refused. ``--keep-alive`` sets how long an idle model stays loaded (the
runtime's time-to-live); ``--no-prompt-cache`` keeps no KV states on disk; ``--allow-management`` opens ``/api/pull`` and ``/api/delete``, which are off
on the API by default.

``--share`` also shares this machine's models with your paired devices: a second listener on the
network (``--share-host``, ``--share-port``) speaking TLS with this device's own certificate, open
to paired devices' tokens only, announced by mDNS as ``_fireside._tcp``; ``fireside devices code``
shows a pairing code for it (see ``engine/devices``).
"""

from __future__ import annotations

import argparse
import logging
import secrets
import signal
import sys
import threading
from typing import TYPE_CHECKING

from ..errors import ModelNotFound, ServerError
from ..models import LoadOptions
from ..settings import SHARE_PORT, Settings
from .models import add_load_options, load_options

if TYPE_CHECKING:
    from ..server import Share

log = logging.getLogger("fireside.serve")
IMMEDIATE_S = 0.001  # "--keep-alive 0": the idle reaper unloads within a second of the reply


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the OpenAI, Ollama and Anthropic APIs in the foreground")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1; 0.0.0.0 opens it to the "
                                  "network and needs an API key)")
    p.add_argument("--port", type=int, help="port (default 8765; 11434 stands in for Ollama)")
    keys = p.add_mutually_exclusive_group()
    keys.add_argument("--api-key", help="require this key and store it in the OS keyring")
    keys.add_argument("--new-key", action="store_true", help="make a random key, store it, and print it once")
    keys.add_argument("--forget-key", action="store_true", help="remove the stored key and exit")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="let browser pages from this origin call the API (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="accept this Host header besides loopback names (repeatable)")
    p.add_argument("--load", action="append", default=[], metavar="MODEL",
                   help="load this model before serving (repeatable)")
    p.add_argument("--no-jit", dest="jit", action="store_false", default=True,
                   help="answer only for models already loaded (default: load a model on its first request)")
    p.add_argument("--keep-alive", type=keep_alive, default=None, metavar="DURATION",
                   help="unload a model idle this long: 10m, 1h, 90s or seconds; -1 never, 0 right after each "
                        "request (default: the settings' 10m); a request's own keep_alive overrides it")
    p.add_argument("--no-prompt-cache", dest="prompt_cache", action="store_false", default=True,
                   help="keep no KV states on disk (default: conversations resume from the prompt cache after a "
                        "restart; see `fireside cache ls`)")
    p.add_argument("--allow-management", action="store_true",
                   help="let API clients pull and delete models (/api/pull, /api/delete); off by default")
    p.add_argument("--allow-image-urls", action="store_true",
                   help="fetch images that clients name by http(s) URL (off by default: the server would reach "
                        "whatever address a client names, including this machine's and the LAN's)")
    p.add_argument("--share", action="store_true",
                   help="share this machine's models with your paired devices over the network (TLS, mDNS)")
    p.add_argument("--share-host", default="0.0.0.0", metavar="HOST", help="address to share on (default: every interface)")
    p.add_argument("--share-port", type=int, default=SHARE_PORT, metavar="PORT",
                   help=f"port to share on (default {SHARE_PORT})")
    p.add_argument("--name", help="this device's name, as others see it (default: the host name)")
    p.add_argument("--lend", type=float, metavar="GIB",
                   help="with --share: lend up to GIB of this machine's memory (and its CPU) to your paired devices, "
                        "which place a model's layers here (`fireside run MODEL --with THIS-DEVICE`)")
    p.add_argument("--embedder", metavar="MODEL",
                   help="the model that embeds uploaded files for /v1/vector_stores and file_search ('none': "
                        "keywords alone; default: the one chosen in the app's Settings, else the built-in minilm)")
    add_load_options(p)  # how every model this server loads is loaded: --ctx, --threads, --parallel, ...
    p.set_defaults(handler=cmd_serve)


def keep_alive(text: str) -> float:
    """``--keep-alive`` as the runtime's idle time-to-live in seconds (its 0 means never)."""
    from ..server import ApiError, keep_alive_s

    try:
        seconds = keep_alive_s(text)
    except ApiError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds < 0:
        return 0.0
    return seconds or IMMEDIATE_S


def api_key(args: argparse.Namespace) -> str | None:
    """The key to require: given, newly made, or the one in the keyring (stored when given or made)."""
    from ..apikey import load_api_key, save_api_key

    key = args.api_key
    if args.new_key:
        key = secrets.token_urlsafe(32)
        print(f"new API key (stored in the OS keyring; shown only now): {key}")
    if key:
        try:
            save_api_key(key)
        except ServerError as exc:  # no keyring here: the key still guards this run
            print(f"warning: {exc}", file=sys.stderr)
        return key
    return load_api_key()


def cmd_serve(args: argparse.Namespace) -> int:
    from ..apikey import delete_api_key

    if args.lend and not args.share:
        print("fireside: --lend lends memory to paired devices, so it needs --share", file=sys.stderr)
        return 2
    if args.forget_key:
        delete_api_key()
        print("the API key is removed; the server now answers loopback clients without one")
        return 0
    from ..server import Share

    settings = Settings.from_env()
    settings.prompt_cache = settings.prompt_cache and args.prompt_cache
    host, port = args.host or settings.host, args.port or settings.port
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    serve(settings, host, port, api_key(args), args.allow_origin, args.allow_host, stop,
          preload=args.load, jit=args.jit, keep_alive_s=args.keep_alive, management=args.allow_management,
          load_defaults=load_options(args), image_urls=args.allow_image_urls,
          share=Share(args.share_host, args.share_port, args.name, lend_gib=args.lend) if args.share else None,
          embedder=args.embedder)
    return 0


def embedder_choice(settings: Settings, library, given: str | None) -> str | None:
    """The library id of the model that embeds documents: ``given`` ('none': keywords alone), else the one
    chosen in Settings (the built-in embedder until one is). A ``given`` name the library does not have is
    a ``ModelNotFound`` that lists the choices; a chosen one that is gone means keywords, with a warning."""
    from ..documents import chosen_embedder

    if given == "none":
        return None
    if given is None:
        chosen = chosen_embedder(settings)
        try:
            return library.get(chosen).id if chosen else None
        except ModelNotFound as exc:
            log.warning("documents: the chosen embedder cannot be used, so keywords alone: %s", exc)
            return None
    try:
        return library.get(given).id
    except ModelNotFound:
        models = library.list()
        embedders = [m.id for m in models if m.info.embeds_only] + ["none"]
        others = [m.id for m in models if not m.info.embeds_only]
        raise ModelNotFound(f"--embedder {given}: no model has that name. Choose one of: {', '.join(embedders)}"
                            + (f" (chat models embed too, less well: {', '.join(others)})" if others else "")) from None


def _library(settings: Settings, embedder: str | None):
    """The library, and the library id of the model that embeds documents (``embedder_choice``)."""
    from ..library import Library

    library = Library(settings)
    log.info("library: %d models", len(library.list()))
    return library, embedder_choice(settings, library, embedder)


def _collections(settings: Settings, engine, embedder: str | None):
    """The uploaded files and vector stores, embedded by ``embedder`` (a library id, or None: keywords)."""
    from ..documents import Collections, embedder_for

    log.info("documents: %s", f"embedded by {embedder}" if embedder else "keywords alone (no embedder chosen)")
    collections = Collections(settings.knowledge_dir, embedder_for(engine, embedder))
    collections.watcher.start()  # watched folders (made in the app) are rescanned while the server runs
    return collections


def serve(settings: Settings, host: str, port: int, key: str | None, origins: list[str], hosts: list[str],
          stop: threading.Event, *, preload: list[str] = (), jit: bool = True, keep_alive_s: float | None = None,
          management: bool = False, load_defaults: LoadOptions | None = None, image_urls: bool = False,
          share: Share | None = None, embedder: str | None = None) -> None:
    """Start everything, serve until ``stop`` is set or Ctrl-C, then shut down in reverse. ``embedder``:
    the model that embeds documents ('none', or None for the one chosen in Settings)."""
    from ..facade import Engine
    from ..server import SecurityPolicy, ServerThread, Sharing, check_bind, create_app

    check_bind(host, key)
    settings.ensure_dirs()
    log.info("settings: models in %s", ", ".join(str(p) for p in settings.models_dirs))
    library, embedder = _library(settings, embedder)  # before anything starts: a wrong embedder stops here
    engine = Engine(settings, library=library, resolver=lambda ref: library.get(ref).path, idle_ttl_s=keep_alive_s,
                    load_defaults=load_defaults)
    log.info("engine: idle models unload after %s", f"{engine.idle_ttl_s:g} s" if engine.idle_ttl_s else "never")
    log.info("prompt cache: %s", f"{settings.prompt_cache_dir}, up to {settings.prompt_cache_cap_bytes / 2**30:g} GiB"
             if settings.prompt_cache else "off")
    for ref in preload:
        loaded = engine.load(library.get(ref).id)
        log.info("loaded %s (%s, context %d, %d slots)", loaded.model_id, loaded.verdict, loaded.n_ctx,
                 loaded.parallel)
    policy = SecurityPolicy(api_key=key, bind_host=host, port=port, allowed_origins=origins, allowed_hosts=hosts,
                            allow_management=management, allow_image_urls=image_urls)
    sharing = Sharing(settings, share, engine, library, jit) if share else None
    collections = _collections(settings, engine, embedder)
    requests_logged = logging.getLogger().isEnabledFor(logging.INFO)  # --verbose: a line for each request too
    server = ServerThread(create_app(engine, settings, library, policy=policy, jit=jit,
                                     pairing=sharing.desk if sharing else None, collections=collections), host, port,
                          access_log=requests_logged)
    try:
        server.start()
        if sharing:
            sharing.start()
            print(f"sharing with paired devices on {sharing.server.reachable_urls[0]} as {sharing.name} (TLS, fingerprint "
                  f"{sharing.identity.fingerprint[:16]}...); `fireside devices code` shows a pairing code")
        print(f"Fireside API on {server.url}  (OpenAI: {server.url}/v1  Ollama: {server.url}  "
              f"Anthropic: {server.url}; docs: {server.url}/docs){'  key required' if key else ''}"
              f"{'  model management on' if management else ''}{'  image URLs fetched' if image_urls else ''}")
        print("Ctrl-C stops it.")
        while not stop.wait(0.5):  # wake now and then so Ctrl-C is seen on every platform
            pass
    except KeyboardInterrupt:
        pass
    finally:
        log.info("stopping the server")
        if sharing:
            sharing.stop()
        server.stop()
        collections.close()
        log.info("stopping the runners")
        engine.close()
