"""When a runner waits for requests sent together, and when it never does (``Gather`` in gather.py): by
the quiet-period rule, and by what the server says is on its way (``runtime/arrivals.py``)."""

from __future__ import annotations

import pytest

from fireside.engine.runner.gather import GATHER_MAX_S, GATHER_MEMORY_S, GATHER_QUIET_S, Gather


def test_a_lone_user_never_waits():
    g = Gather()
    for t in (0.0, 5.0, 9.0):  # one request at a time, each reaching an idle runner
        g.arrived(t, idle=True)
        assert g.wait(t) == 0.0


def test_after_a_burst_with_company_the_next_burst_waits_for_its_requests():
    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.002, idle=False)  # a second request came during the first one's step: company
    g.arrived(10.0, idle=True)  # the next burst
    assert g.wait(10.0) == pytest.approx(GATHER_QUIET_S)
    g.arrived(10.002, idle=False)  # each arrival restarts the quiet period...
    assert g.wait(10.002) == pytest.approx(GATHER_QUIET_S)
    assert g.wait(10.002 + GATHER_QUIET_S) == 0.0  # ...which ends the wait once it passes quietly
    for k in range(1, 20):  # requests trickling in: the wait still ends GATHER_MAX_S after the first
        g.arrived(10.0 + k * GATHER_QUIET_S / 2, idle=False)
    assert g.wait(10.0 + GATHER_MAX_S) == 0.0


def test_a_request_joining_running_streams_never_holds_them_up():
    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.001, idle=False)
    g.arrived(1.0, idle=True)
    g.arrived(1.5, idle=False)  # long after the burst began: its streams are decoding
    assert g.wait(1.5) == 0.0


def test_company_is_forgotten_after_a_while():
    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.001, idle=False)
    g.arrived(GATHER_MEMORY_S + 1.0, idle=True)
    assert g.wait(GATHER_MEMORY_S + 1.0) == 0.0


def test_a_request_held_up_by_the_first_step_still_counts_as_company():
    # On a machine with no core to spare, the first request's step slows the server's work on the
    # second, which reached the runner 78-141 ms later (seen on a 2-core EPYC): still sent together.
    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.1, idle=False)  # came while the first step ran (it has not ended yet)
    g.stepped(0.5)
    g.arrived(10.0, idle=True)
    assert g.wait(10.0) == pytest.approx(GATHER_QUIET_S)  # so the next burst gathers


def test_a_request_after_the_first_step_ended_is_not_company():
    g = Gather()
    g.arrived(0.0, idle=True)
    g.stepped(0.2)  # the first step ended; the reply now streams
    g.arrived(0.3, idle=False)  # another user's message, into the running batch
    g.arrived(10.0, idle=True)
    assert g.wait(10.0) == 0.0


def test_gathering_stops_after_bursts_in_a_row_without_company():
    """A batch job once, then a person chatting alone: their messages waited 10-30 ms each for ten
    minutes. After ``GATHER_LONE_BURSTS`` lone bursts they do not; a burst with company starts it again."""
    from fireside.engine.runner.gather import GATHER_LONE_BURSTS

    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.001, idle=False)  # company
    t = 0.0
    for _ in range(GATHER_LONE_BURSTS):
        t += 10.0
        g.arrived(t, idle=True)
        assert g.wait(t) == pytest.approx(GATHER_QUIET_S)  # still expecting company
    t += 10.0
    g.arrived(t, idle=True)
    assert g.wait(t) == 0.0
    g.arrived(t + 0.001, idle=False)  # company again
    g.arrived(t + 10.0, idle=True)
    assert g.wait(t + 10.0) == pytest.approx(GATHER_QUIET_S)


def test_a_request_the_server_says_comes_alone_never_waits_even_after_a_burst():
    """A person's or a script's next message after a batch job: the server had nothing else on its way."""
    g = Gather()
    g.arrived(0.0, idle=True)
    g.arrived(0.001, idle=False)  # company: the burst memory is on
    g.arrived(10.0, idle=True, others=0)
    assert g.wait(10.0) == 0.0


def test_requests_the_server_has_on_their_way_are_waited_for_until_the_last_comes():
    g = Gather()  # no burst before: the quiet-period rule alone would not wait
    g.arrived(0.0, idle=True, others=2)
    assert g.wait(0.0) == pytest.approx(GATHER_QUIET_S)
    g.arrived(0.004, idle=False, others=1)
    assert g.wait(0.004) == pytest.approx(GATHER_QUIET_S)
    g.arrived(0.006, idle=False, others=0)  # the last of them: the burst is whole
    assert g.wait(0.006) == 0.0
    g.arrived(1.0, idle=True, others=3)  # ones that never come are waited for GATHER_MAX_S at most
    for k in range(1, 10):
        g.arrived(1.0 + k * GATHER_QUIET_S / 2, idle=False, others=3)
    assert g.wait(1.0 + GATHER_MAX_S) == 0.0
