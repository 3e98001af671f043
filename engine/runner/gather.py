"""Gathering a burst: how long an idle runner waits for requests sent together, so that they share their
first step instead of the first being evaluated alone.

The worker (``process.py``) tells ``Gather`` when each ``generate`` request arrived and when each step
ended, and asks it how long to wait before the next step. ``Gather`` keeps no clock of its own (every
time is passed in), so tests drive it with made-up times; it runs on the runner's worker thread.
"""

from __future__ import annotations

GATHER_QUIET_S = 0.010  # a burst is gathered until this long passes with no request arriving (4 ms missed
#                         requests 4-5 ms apart on a 2-core EPYC),
GATHER_MAX_S = 0.030  # this long at most (15 ms missed one 16 ms behind),
GATHER_MEMORY_S = 600.0  # and only while a burst in this long has had company
GATHER_LONE_BURSTS = 3  # and not after this many bursts in a row that had none


class Gather:
    """Lets requests sent together share their first step, as they do in llama-server.

    Fireside's server spends 1-2 ms of CPU on each request before it reaches the runner, and once a
    step runs, the runner's threads take every core: four requests sent at once reached an idle
    runner 2-10 ms apart, the first was evaluated alone and the other three waited for that step
    (their first tokens came 8% later than llama-server's, and four streams' throughput with them).
    So a request reaching an idle runner waits until ``GATHER_QUIET_S`` pass with no other request
    arriving (``GATHER_MAX_S`` at most, and no longer than it takes to fill the slots). A lone user
    would pay that quiet period on every message for nothing, so it applies only while the runner's
    clients have recently sent requests together: a burst has company when another request arrives
    within ``GATHER_MAX_S`` of its first or before the burst's first step has ended (on a machine
    with no core to spare, that step's threads hold up the server's work on the next request for
    tens of milliseconds: 78-141 ms were seen on a 2-core EPYC), and gathering lasts
    ``GATHER_MEMORY_S`` from then, or until ``GATHER_LONE_BURSTS`` bursts in a row had no company: one
    batch job, then a person chatting alone, made every message of the next ten minutes wait 10-30 ms
    (bench/vision.py's first token: 50 ms against 26 ms without gathering).
    Times are ``time.monotonic()`` seconds; a request's is when the runner's reader took it.
    """

    def __init__(self) -> None:
        self.burst_at = self.company_at = float("-inf")
        self.first_step_end = float("-inf")  # when the burst's first step ended (inf: not yet)
        self.until = self.end = 0.0
        self.lone = 0  # bursts in a row that had no company

    def arrived(self, at: float, idle: bool, others: int | None = None) -> None:
        """A ``generate`` request came at ``at``; ``idle``: nothing was being decoded (a burst starts);
        ``others``: the requests the server was still preparing when it sent this one (arrivals.py;
        None: unknown, as for a request that did not come through the server)."""
        if idle:
            if self.burst_at > float("-inf"):  # the burst before this one: had it company?
                self.lone = 0 if self.company_at >= self.burst_at else self.lone + 1
            self.burst_at, self.first_step_end = at, float("inf")
            if others is None:
                gathering = at - self.company_at < GATHER_MEMORY_S and self.lone < GATHER_LONE_BURSTS
            else:  # the server knows: wait only for the requests it has on their way
                gathering = others > 0
            self.end = at + GATHER_MAX_S if gathering else 0.0
        elif at - self.burst_at < GATHER_MAX_S or at < self.first_step_end:
            self.company_at = at
        self.until = at if others == 0 else at + GATHER_QUIET_S  # none on their way: the burst is whole

    def stepped(self, now: float) -> None:
        """A step ended at ``now`` (the first of a burst marks where company stops counting)."""
        self.first_step_end = min(self.first_step_end, now)

    def wait(self, now: float) -> float:
        """Seconds still to wait for the burst's next request before the first step (0: run it)."""
        return max(0.0, min(self.until, self.end) - now)
