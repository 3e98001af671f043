"""Requests on their way to a runner, so a runner knows whether to wait for company.

Requests sent together should share their first step, as in llama-server; a runner cannot see a
request the server is still reading, so it used to wait a quiet period for one whenever its clients
had lately sent requests together (``Gather``, ``runner/gather.py``), and a person or a script sending
one request at a time after such a burst paid that wait on each. Now the server takes a ``Ticket``
for each generation request as soon as its headers are read (before its body, its checks, its
template), and the runtime hands the ticket in as it sends the request to its runner, telling the
runner how many others are still on their way: none, and the runner starts at once; some, and it waits
for them (``GATHER_MAX_S`` at most). A request the runtime gets without a ticket (the app's own chats)
leaves the runner to its quiet-period rule.

Requests for other models count too (a runner may then wait for a request that goes elsewhere, at
most ``GATHER_MAX_S``); a request refused before it reaches the runtime gives its ticket back when its
response ends.

Threading: thread-safe; the server takes tickets on its event loop, the runtime hands them in on the
requests' threads.
"""

from __future__ import annotations

import threading


class Arrivals:
    """The generation requests a server has begun reading and not yet handed to a runner."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0

    def pending(self) -> int:
        """Tickets taken and not yet handed in."""
        with self._lock:
            return self._open

    def enter(self) -> Ticket:
        with self._lock:
            self._open += 1
        return Ticket(self)

    def _leave(self, ticket: Ticket) -> int:
        with self._lock:
            if not ticket.left:
                ticket.left = True
                self._open -= 1
            return self._open


class Ticket:
    """One request's place among the arrivals; ``hand_in`` (idempotent) says how many others remain."""

    def __init__(self, arrivals: Arrivals):
        self.arrivals, self.left = arrivals, False

    def hand_in(self) -> int:
        return self.arrivals._leave(self)
