"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers, and one for its body.

uvicorn closes a keep-alive connection that sends nothing for ``timeout_keep_alive`` seconds, but a
connection that sends part of a request line or headers and then waits (or trickles a byte now and
then: each byte resets that timer) is kept open for ever, so fifty of them pin fifty connections
(slowloris). ``GuardedH11Protocol`` arms one timer when a connection opens and, on a kept-alive
connection, when the first byte of its next request arrives; if that request's headers are not all in
when it fires (h11 still waits for them), the connection is closed. A connection that sends nothing
after a reply is uvicorn's to close (``timeout_keep_alive``: no byte resets it then), so a listener
may keep idle connections longer than this deadline (the shared listener does, for paired devices).
A request whose headers arrived in time is never cut, however long its reply.

The body has a deadline of its own, armed when the headers are in: a client that sends
``Content-Length: 8000000`` and then a byte a second would hold its connection, and a worker waiting
for the body, for days. If the body is not all in ``body_timeout_s`` (60 s: the 8 MiB body limit at
about 1 Mbit/s) after its headers, the client gets a 408 and the connection is closed.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import dialect_of, error_body, status_problem

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 60.0


class GuardedH11Protocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request headers take over ``header_timeout_s``."""

    header_timeout_s = HEADER_TIMEOUT_S
    body_timeout_s = BODY_TIMEOUT_S
    log_access = False  # this server's own wish; uvicorn's is global (whether ``uvicorn.access`` has handlers)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.access_log = self.log_access and self.access_logger.hasHandlers()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._body_deadline: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def data_received(self, data: bytes) -> None:
        if self._header_deadline is None and self.conn.their_state is h11.IDLE:  # a kept-alive one's next request
            self._arm_header_deadline()
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        sending = self.conn.their_state is h11.SEND_BODY  # headers in, body not yet complete
        if sending and self._body_deadline is None:
            self._body_deadline = self.loop.call_later(self.body_timeout_s, self._on_body_deadline)
        elif not sending and self._body_deadline is not None:
            self._body_deadline.cancel()
            self._body_deadline = None

    def on_response_complete(self) -> None:
        if self._header_deadline is not None:  # idle from here on: the next request's first byte arms it
            self._header_deadline.cancel()
            self._header_deadline = None
        if self.conn.trailing_data[0]:  # part of a pipelined request is already in: its clock runs now
            self._arm_header_deadline()  # (first: the base class may start on that request at once)
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        for deadline in (self._header_deadline, self._body_deadline):
            if deadline is not None:
                deadline.cancel()
        super().connection_lost(exc)

    def _arm_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
        self._header_deadline = self.loop.call_later(self.header_timeout_s, self._on_header_deadline)

    def _on_header_deadline(self) -> None:
        self._header_deadline = None
        waiting = self.conn.their_state is h11.IDLE  # no complete request line and headers yet
        if waiting and not self.transport.is_closing():
            self.logger.debug("closing a connection whose request headers took over %.0f s", self.header_timeout_s)
            self.transport.close()


    def _on_body_deadline(self) -> None:
        self._body_deadline = None
        if self.conn.their_state is not h11.SEND_BODY or self.transport.is_closing():
            return
        self.logger.debug("closing a connection whose request body took over %.0f s", self.body_timeout_s)
        if self.cycle is None or not self.cycle.response_started:  # a 408 the client can read, then close
            problem = status_problem(408, f"the request body did not arrive within {self.body_timeout_s:g} s of "
                                          "its headers", "request_timeout")
            body = json.dumps(error_body(dialect_of(self.scope.get("path", "/")), problem)).encode("utf-8")
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                                 b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        self.transport.close()  # the app waiting for the body sees the client gone


def guarded_protocol(header_timeout_s: float, body_timeout_s: float = BODY_TIMEOUT_S,
                     access_log: bool = False) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn builds per connection, with these deadlines, logging each request to
    ``uvicorn.access`` or not."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout_s": header_timeout_s,
                                                              "body_timeout_s": body_timeout_s,
                                                              "log_access": access_log})
