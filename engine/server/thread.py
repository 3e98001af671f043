"""``ServerThread``: uvicorn on a background thread, for the desktop app (and tests, and the bench).

The listening socket is bound here, on the caller's thread, before uvicorn starts: a taken port is an
``OSError`` at once, turned into a ``ServerError`` that says what to do, and port 0 picks a free port
whose number ``port`` then reports. ``start`` then waits until uvicorn says it has started or its
thread has died (a failure inside uvicorn is reported, never waited on forever). ``stop`` asks
uvicorn to exit (``should_exit``), gives open streams a few seconds, and joins the thread. Each
connection speaks ``h11guard.GuardedH11Protocol``: its request headers must arrive within
``header_timeout_s`` (10 s), and its body within ``body_timeout_s`` (60 s) of them, so half-open
and trickling connections cannot pile up; one that sends nothing closes after ``keep_alive_s`` (5 s;
the shared listener keeps its paired devices' connections longer, ``devices.identity.LINK_IDLE_S``). With ``ssl_certfile``/``ssl_keyfile`` it speaks TLS (the
shared listener of ``fireside serve --share``) and its ``url`` is ``https://``; ``reachable_urls`` names the
addresses other machines can use where it listens on every interface (``0.0.0.0`` is not one).

uvicorn's logging settings are process-wide: a second server made with ``access_log=False`` used to empty
the ``uvicorn.access`` handlers (the app's request log among them) and its ``log_level`` to quiet the
first server's lines. Each ``ServerThread`` therefore leaves the loggers' handlers alone and decides per
connection whether it logs requests (``h11guard``); a ``log_level`` only ever makes uvicorn's loggers more
verbose, never less, so the most verbose server running is heard.
"""

from __future__ import annotations

import errno
import logging
import socket
import sys
import threading
import time

import uvicorn

from ..errors import ServerError
from .h11guard import BODY_TIMEOUT_S, HEADER_TIMEOUT_S, guarded_protocol

log = logging.getLogger(__name__)
POLL_S = 0.01
MALLOC_ARENAS = 2  # glibc's M_ARENA_MAX for a process that serves: see ``bound_malloc_arenas``
MMAP_FROM = 4 * 1024 * 1024  # allocations this big are mapped, and given back when freed (Pillow's 16 MB blocks)


def bound_malloc_arenas(arenas: int = MALLOC_ARENAS) -> None:
    """Cap glibc's malloc arenas (Linux; elsewhere nothing). glibc gives a thread that allocates while
    another holds an arena an arena of its own, up to eight a core, and keeps what is freed there for
    that arena: a server whose 40 pool threads each decoded big images grew 130 MB in two minutes of
    fuzzing (6 MB with two arenas), its freed pixels spread over dozens of arenas. The server's threads
    take turns on the GIL anyway, so two arenas cost it nothing; the runners are processes of their own.
    And allocations from ``MMAP_FROM`` up are mapped on their own and unmapped when freed: glibc raises
    that threshold to the size of the first big block it frees (up to 32 MB), after which Pillow's 16 MB
    image blocks came from the heap and stayed there once freed."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, arenas)  # M_ARENA_MAX
        libc.mallopt(-3, MMAP_FROM)  # M_MMAP_THRESHOLD, fixed: no longer raised to 32 MB by the first big free
    except (OSError, AttributeError):  # not glibc (musl): its malloc has no arenas to cap
        pass
KEEP_ALIVE_S = 5  # an idle keep-alive connection closes after this (uvicorn's default, said here)


class ServerThread:
    """Serve ``app`` on ``host:port`` from a daemon thread. ``start``/``stop`` may be called from any
    thread (the GUI thread included: ``start`` blocks only until the socket listens)."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 8765, *, log_level: str = "warning",
                 access_log: bool = False, graceful_s: float = 3.0, header_timeout_s: float = HEADER_TIMEOUT_S,
                 body_timeout_s: float = BODY_TIMEOUT_S, ssl_certfile: str | None = None, ssl_keyfile: str | None = None,
                 keep_alive_s: int = KEEP_ALIVE_S, websockets: bool = False):
        self.app, self.host, self.requested_port = app, host, port
        self.scheme = "https" if ssl_certfile else "http"
        _loosen_loggers(log_level, access_log)
        self.config = uvicorn.Config(app, log_config=None, log_level=None, access_log=True,  # True: no handler cleared
                                     timeout_graceful_shutdown=graceful_s, lifespan="off",
                                     ws="websockets-sansio" if websockets else "none",  # websockets: the RPC tunnel
                                     http=guarded_protocol(header_timeout_s, body_timeout_s, access_log),
                                     timeout_keep_alive=keep_alive_s, ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)
        self.server = uvicorn.Server(self.config)
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._failure: BaseException | None = None
        self.port = port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def reachable_urls(self) -> list[str]:
        """The URLs other machines reach this server at: each of this machine's network addresses when it
        listens on all of them (``0.0.0.0``), else its own ``url``."""
        from ..devices import local_addresses
        from .security import is_wildcard

        if not is_wildcard(self.host):
            return [self.url]
        return [f"{self.scheme}://{ip}:{self.port}" for ip in local_addresses()] or [
            f"{self.scheme}://localhost:{self.port}"]

    @property
    def running(self) -> bool:
        return bool(self._thread and self._thread.is_alive() and self.server.started)

    def start(self, timeout: float = 15.0) -> None:
        """Bind, start uvicorn, and return once it accepts connections; ``ServerError`` otherwise."""
        if self._thread is not None:
            raise ServerError("this server thread was already started; make a new one")
        self._socket = bind_socket(self.host, self.requested_port)
        self.port = self._socket.getsockname()[1]
        bound_malloc_arenas()
        self._thread = threading.Thread(target=self._run, name=f"fireside-server-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive():
                self._close_socket()
                raise ServerError(f"the API server on {self.url} stopped while starting: {self._failure!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(f"the API server on {self.url} did not start within {timeout:.0f} s")
            time.sleep(POLL_S)  # uvicorn offers no start callback: poll its flag, bounded by the deadline
        log.info("API server listening on %s", self.url)

    def _run(self) -> None:
        try:
            self.server.run(sockets=[self._socket])
        except BaseException as exc:  # SystemExit included: uvicorn exits on some start-up failures
            self._failure = exc
            log.error("the API server thread ended: %r", exc)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and join the thread. Idempotent; does not touch the runtime."""
        if self._thread is None:
            return
        self.server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self.server.force_exit = True
            self._thread.join(timeout)
        self._close_socket()
        log.info("API server on %s stopped", self.url)

    def _close_socket(self) -> None:
        if self._socket is not None:
            self._socket.close()


def _loosen_loggers(log_level: str, access_log: bool) -> None:
    """Make uvicorn's loggers at least as verbose as ``log_level`` (and its access log INFO when this server
    logs requests), never quieter: another server in this process may want more."""
    from uvicorn.config import LOG_LEVELS

    level = LOG_LEVELS[log_level.lower()]
    wanted = {"uvicorn.error": level, "uvicorn.asgi": level}
    if access_log:
        wanted["uvicorn.access"] = logging.INFO
    for name, want in wanted.items():
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET or want < logger.level:
            logger.setLevel(want)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a clear ``ServerError`` when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    if sys.platform == "win32":  # SO_REUSEADDR on Windows would let us steal a port in use
        sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_EXCLUSIVEADDRUSE", socket.SO_REUSEADDR), 1)
    else:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)):
            raise ServerError(f"port {port} on {host} is already in use (another Fireside, Ollama or LM Studio?); "
                              f"stop that program or choose another port with --port") from exc
        raise ServerError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(False)
    return sock
