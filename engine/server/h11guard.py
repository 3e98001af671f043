"""uvicorn's HTTP/1.1 protocol with a deadline for a request's headers.

uvicorn closes a keep-alive connection that sends nothing for ``timeout_keep_alive`` seconds, but a
connection that sends part of a request line or headers and then waits (or trickles a byte now and
then: each byte resets that timer) is kept open for ever, so fifty of them pin fifty connections
(slowloris). ``GuardedH11Protocol`` arms one timer when a connection opens and again after each
response; if the next request's headers are not all in when it fires (h11 still waits for them), the
connection is closed. A request whose headers arrived in time is never cut, however long its reply.
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0


class GuardedH11Protocol(H11Protocol):
    """``H11Protocol`` that closes a connection whose request headers take over ``header_timeout_s``."""

    header_timeout_s = HEADER_TIMEOUT_S

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_deadline: asyncio.TimerHandle | None = None
        self._arm_header_deadline()

    def on_response_complete(self) -> None:
        self._arm_header_deadline()  # first: the base class may start on a pipelined request at once
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
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


def guarded_protocol(header_timeout_s: float) -> type[GuardedH11Protocol]:
    """The protocol class uvicorn builds per connection, with this deadline."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout_s": header_timeout_s})
