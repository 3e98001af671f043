"""How many threads each decode step runs on: chosen per phase, kept right while the machine changes.

llama.cpp's worker threads meet at a barrier after every operation of a step, so when another
process takes one of their cores the whole step waits for the descheduled thread: on a 2-core
machine with one busy process, 2 threads decoded the starter model at 38.6 tok/s and 1 thread at
117 (issue 28). No count chosen once at load is right for long on a desktop, so each step's time is
measured and the count follows it.

``ThreadController`` is the policy, a pure object fed ``(threads, seconds, tokens)`` per step and
answering the count for the next one (tests run it on recorded timings). It keeps a smoothed time
per token for each count (by step size: a step of 4 streams is not a step of 1), stays on the
fastest count it has measured recently, and probes a neighbouring count now and then: soon after a
step turns slow (another process woke up: try fewer) and, with backing off while probes keep
losing, every ``PROBE_MAX_S`` at most in each direction (the machine went quiet: try more). A count
that is no faster than one fewer by ``MARGIN`` loses to it, so a small model that gains nothing
from more threads does not take them from the rest of the desktop. A user's ``--threads N`` is a
fixed choice that no measurement moves.

A probe that loses waits before the next, long enough that lost probes cost at most ``OVERHEAD`` of
the time; beside two busy processes one lost step on two threads took 100-200 ms, so the next probe up
came 5 s of decoding later, and a machine gone quiet decoded on one thread all that while.
``MachineLoad`` says sooner: on Linux it reads the cores other processes used (``/proc/stat`` less this
process's own CPU time) every ``LOOK_S``, and when they drop from at least ``BUSY_CORES`` to under
``QUIET_CORES`` the controller probes more threads at once (``quiet``). It is only a hint:
the probe's own steps decide, and elsewhere (no ``/proc/stat``) probing alone finds the quiet machine.

``StepThreads`` applies it to a live context: one controller for steps that only decode and one for
steps that evaluate a prompt (``llama_set_n_threads`` sets both counts; llama.cpp uses the batch
count for any step of more than one token), within the share of the engine's cores the runtime
gives this runner (``share``, set from the runner's reader thread; ``runtime/threadbudget.py``).

Runs on the runner's worker thread, except ``share``, which any thread may set.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

MARGIN = 0.03  # a count must beat one fewer by this share of a step to be worth its thread (noise: ~1-2%)
SLOW = 1.3  # a step this much slower than the count's smoothed time says the machine changed: probe now
PROBE_MIN_S = 0.25  # the first probe after a change of count; each lost probe doubles the wait ...
PROBE_MAX_S = {1: 1.5, -1: 4.0}  # ... up to this: more threads (a quiet machine again is found within about
#                                 this long), fewer (a busier machine is seen at once by its slow steps: SLOW),
OVERHEAD = 0.03  # ... but always long enough that lost probes cost at most this share of the time
PROBE_STEPS = 2  # steps measured on the probed count ...
CLEARLY_WORSE = 1.3  # ... but one step this much slower than the count it left ends the probe at once
FRESH_S = 2.0  # a count's time older than this (of measured step time) no longer speaks for it, ...
FRESH_STEPS = PROBE_STEPS + 1  # ... unless measured within this many steps: a long prompt's chunks take
#                               seconds each, and the count a probe left must still speak when it ends
SLOW_ALPHA = 0.1  # how much one step moves a count's smoothed time per token ...
CHUNK_ALPHA = 0.5  # ... or a prompt chunk's: each is hundreds of tokens (little noise), and a long prompt's
#                   time per token grows with its depth (attention), which a slow average took for a busier
#                   machine (1.3x behind after a few chunks), probing fewer threads again and again
LOOK_S = 0.25  # how often the runner looks at what other processes use (MachineLoad)
BUSY_CORES, QUIET_CORES = 0.6, 0.3  # other processes' cores that mean busy, and quiet again (the server
#                                     and a streaming client take about 0.1 at 60 tokens/s)


@dataclass
class _Estimate:
    per_token: float  # smoothed seconds per token
    at: float  # the controller's clock when last measured
    step: int  # the controller's step count then


class ThreadController:
    """Chooses a thread count from measured step times. Pure: no clock, no llama.cpp (the clock is
    the sum of the step seconds it is fed). ``most`` is the most threads it may use; ``fixed`` a
    user's choice, which it keeps whatever it measures (only a smaller ``most`` caps it)."""

    def __init__(self, most: int, fixed: int | None = None, start: int | None = None):
        self.fixed = fixed
        self.most = max(1, fixed or most)
        self.threads = min(self.most, max(1, start or self.most))
        self.clock = 0.0
        self.steps = 0
        self.est: dict[tuple[int, int], _Estimate] = {}  # (step size bucket, threads) -> time per token
        self.probe: tuple[int, int, float] | None = None  # (threads to return to, steps left, seconds lost)
        self.wait = {-1: PROBE_MIN_S, 1: PROBE_MIN_S}  # seconds between probes down and up
        self.next_at = {-1: PROBE_MIN_S, 1: PROBE_MIN_S}
        self.last_probe = 1  # the direction probed last (probes alternate where both are open)
        self.slowed_at = float("-inf")  # when slow steps last brought a probe down forward
        self.slow_steps = 0

    def limit(self, most: int) -> int:
        """Cap the count at ``most`` (the runner's share of the engine's cores changed); returns the
        count. A user's fixed count stays as it is: it is their choice, and the budget counts it so."""
        most = max(1, most)
        if self.fixed is not None or most == self.most:
            return self.threads
        self.most, self.probe = most, None
        if most > self.threads:  # more room: look up soon
            self.next_at[1] = self.clock + PROBE_MIN_S / 2
            self.wait[1] = PROBE_MIN_S
        self.threads = min(self.threads, self.most)
        return self.threads

    def quiet(self) -> None:
        """Other processes stopped taking cores: probe one more thread from the next step on, however long
        the wait after the last lost probe was to be."""
        if self.fixed is None and self.probe is None and self.threads < self.most:
            self.next_at[1] = self.clock
            self.wait[1] = PROBE_MIN_S

    def observe(self, threads: int, seconds: float, tokens: int) -> int:
        """One step of ``tokens`` tokens took ``seconds`` on ``threads`` threads; returns the count for
        the next step."""
        if self.fixed is not None or tokens <= 0 or seconds <= 0:
            return self.threads
        self.clock += seconds
        self.steps += 1
        bucket = _bucket(tokens)
        per_token = seconds / tokens
        old = self.est.get((bucket, threads))
        fresh = old is not None and self._is_fresh(old)
        # a probe's steps measured before this one (None: not probing this count)
        measured = PROBE_STEPS - self.probe[1] if self.probe is not None and threads == self.threads else None
        if measured == 0:
            fresh = False  # a probe measures its count afresh: a time from before the machine changed
            #                (a busy stretch) would outweigh it for dozens of probes if smoothed into
        if fresh:
            smooth = SLOW_ALPHA if bucket <= 8 else CHUNK_ALPHA
            alpha = smooth if measured is None else 1 / (measured + 1)  # a probe: its steps' mean
            old.per_token += alpha * (per_token - old.per_token)
            old.at, old.step = self.clock, self.steps
        else:
            self.est[(bucket, threads)] = _Estimate(per_token, self.clock, self.steps)
        if self.probe is not None:
            self._probing(bucket, threads, per_token, tokens)
        elif threads == self.threads:
            self._steady(bucket, per_token, old if fresh else None)
        return self.threads

    def _probing(self, bucket: int, threads: int, per_token: float, tokens: int) -> None:
        back, left, extra = self.probe
        if threads != self.threads:
            return
        base = self._fresh(bucket, back)
        if base is not None:
            extra += (per_token - base.per_token) * tokens
        if base is not None and per_token > CLEARLY_WORSE * base.per_token:
            left = 0  # clearly worse: no need to measure it again
        else:
            left -= 1
        if left > 0:
            self.probe = (back, left, extra)
            return
        self.probe = None
        direction = 1 if threads > back else -1
        best = self._best(bucket, back)
        if best != back:  # the probe won: settle there, and look the other way soon
            self.wait = {-1: PROBE_MIN_S, 1: PROBE_MIN_S}
            self.next_at[-direction] = self.clock + PROBE_MIN_S
        else:  # lost: wait longer (up to PROBE_MAX_S), and long enough that probing costs at most OVERHEAD
            #    of the time (on a machine so busy that a step on more threads takes ten times as long)
            self.wait[direction] = max(min(PROBE_MAX_S[direction], 2 * self.wait[direction]), extra / OVERHEAD)
        self.next_at[direction] = self.clock + self.wait[direction]
        self.threads = best

    def _steady(self, bucket: int, per_token: float, est: _Estimate | None) -> None:
        t = self.threads
        slow = est is not None and per_token > SLOW * est.per_token
        self.slow_steps = self.slow_steps + 1 if slow else 0
        # two slow steps running (one is a stall: a page fault, an interrupt)
        if self.slow_steps >= 2 and t > 1 and self.clock - self.slowed_at > PROBE_MAX_S[1]:
            self.slowed_at = self.clock  # the machine got busier: see whether fewer threads are faster now
            self.next_at[-1] = self.clock
            self.wait[-1] = PROBE_MIN_S
        open_dirs = [d for d in (-1, 1) if 1 <= t + d <= self.most and self.clock >= self.next_at[d]]
        if not open_dirs:
            return
        direction = open_dirs[0] if len(open_dirs) == 1 else -self.last_probe
        self.last_probe = direction
        self.probe = (t, PROBE_STEPS, 0.0)
        self.threads = t + direction

    def _fresh(self, bucket: int, threads: int) -> _Estimate | None:
        e = self.est.get((bucket, threads))
        return e if e is not None and self._is_fresh(e) else None

    def _is_fresh(self, e: _Estimate) -> bool:
        return self.clock - e.at < FRESH_S or self.steps - e.step <= FRESH_STEPS

    def _best(self, bucket: int, back: int) -> int:
        """The fastest count measured recently for this step size, preferring fewer threads unless
        more are faster by ``MARGIN``; ``back`` when it has no recent time of its own to compare."""
        if self._fresh(bucket, back) is None:
            return back
        best, best_time = None, 0.0
        for t in range(1, self.most + 1):
            e = self._fresh(bucket, t)
            if e is None:
                continue
            if best is None or e.per_token < best_time * (1 - MARGIN):
                best, best_time = t, e.per_token
        return best or back


def _bucket(tokens: int) -> int:
    """Steps of up to 8 tokens are told apart by size (streams decoded together); prompt chunks by
    power of two (their time per token changes little with size)."""
    return tokens if tokens <= 8 else 1 << (tokens - 1).bit_length()


class MachineLoad:
    """What other processes take of the machine's cores, from ``/proc/stat`` (Linux) and this process's
    own CPU time. ``went_quiet`` is polled after each step and true once when they drop from busy to
    quiet; never true where ``/proc/stat`` cannot be read."""

    def __init__(self, path: str = "/proc/stat", clock=time.monotonic, own=time.process_time):
        self.path, self.clock, self.own = path, clock, own
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.busy = False
        self.next_at = 0.0
        self.last = self._read()

    def _read(self) -> tuple[float, float, float] | None:
        """(now, seconds of CPU every process used, seconds this process used), or None."""
        try:
            with open(self.path, "rb") as f:
                fields = f.readline().split()
        except OSError:
            return None
        if len(fields) < 8 or fields[0] != b"cpu":
            return None
        user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[1:8])
        return self.clock(), (user + nice + system + irq + softirq) / self.hz, self.own()

    def others(self) -> float | None:
        """Cores other processes used since the last call (None: unknown, or too soon to say)."""
        if self.last is None:
            return None
        now = self._read()
        if now is None or now[0] - self.last[0] < LOOK_S / 2:
            return None
        (t0, all0, own0), (t1, all1, own1) = self.last, now
        self.last = now
        return max(0.0, (all1 - all0) - (own1 - own0)) / (t1 - t0)

    def went_quiet(self) -> bool:
        now = self.clock()
        if self.last is None or now < self.next_at:
            return False
        self.next_at = now + LOOK_S
        cores = self.others()
        if cores is None:
            return False
        was, self.busy = self.busy, cores >= BUSY_CORES or (self.busy and cores >= QUIET_CORES)
        return was and not self.busy


class StepThreads:
    """The thread counts of one runner's context: times each ``llama_decode`` and sets the counts
    the controllers choose before the next. ``fixed``: the user's ``--threads``; ``most``: the
    threads the load may use (the machine's cores)."""

    def __init__(self, ctx: Any, most: int, fixed: int | None = None):
        self.ctx = ctx
        self.fixed = fixed
        self.share = most  # the runtime's share for this runner; any thread may set it
        self._share = most
        self.decode = ThreadController(most, fixed)
        self.prompt = ThreadController(most, fixed)
        self.applied: tuple[int, int] = (0, 0)
        self.load = MachineLoad() if fixed is None and most > 1 else None

    def now(self) -> dict:
        """What a ``done`` event and ``stats`` report: the counts in use and how they are chosen."""
        return {"decode": self.decode.threads, "prompt": self.prompt.threads, "share": self.share,
                "fixed": self.fixed is not None}  # share: the most it uses from its next step on

    def run(self, batch: Any, prefill: bool) -> int:
        """``llama_decode(ctx, batch)`` on the chosen counts, timed; returns its result code.
        ``prefill``: the step evaluates prompt tokens (else every token in it is a stream's next)."""
        import llama_cpp as lc

        control, threads = self._apply(prefill)
        started = time.perf_counter()
        rc = lc.llama_decode(self.ctx, batch)
        if rc == 0:
            control.observe(threads, time.perf_counter() - started, batch.n_tokens)
        self._look()
        return rc

    def _look(self) -> None:
        if self.load is not None and self.load.went_quiet():
            self.decode.quiet()
            self.prompt.quiet()

    def embed(self, llama: Any, texts: list[str], counts: list[int], room: int, normalize: bool,
              cancel: threading.Event | None = None) -> list[list[float]] | None:
        """``llama.embed`` over ``texts`` (``counts`` tokens each, ``room`` a batch's), each step a batch's worth
        of them (a passage of ``room`` tokens, or several short ones) on the prompt phase's count, timed: the
        controller sees every ~0.1 s step, as it does a prompt's, so an embedder (long runs of passages) finds
        the count that is fastest now within a few passages; timed a whole call of 16 passages at a time
        it probed once every few seconds and spent most of bench/retrieval.py's indexing on two threads
        taking turns on one free core. None when ``cancel`` is set between steps."""
        vectors: list[list[float]] = []
        for start, end, tokens in _steps(counts, room):
            if cancel is not None and cancel.is_set():
                return None
            control, threads = self._apply(True)
            started = time.perf_counter()
            vectors += llama.embed(texts[start:end], normalize=normalize)
            control.observe(threads, time.perf_counter() - started, max(1, tokens))
            self._look()
        return vectors

    def _apply(self, prefill: bool) -> tuple[ThreadController, int]:
        """The phase's controller and its count, set on the context if it changed."""
        import llama_cpp as lc

        if self.share != self._share:
            self._share = self.share
            self.decode.limit(self._share)
            self.prompt.limit(self._share)
        control = self.prompt if prefill else self.decode
        threads = control.threads
        wanted = (threads, threads)  # one token runs on n_threads, more on n_threads_batch: both are this phase's
        if wanted != self.applied:
            lc.llama_set_n_threads(self.ctx, *wanted)
            self.applied = wanted
        return control, threads


def _steps(counts: list[int], room: int):
    """``(start, end, tokens)`` runs of consecutive inputs whose tokens (each cut at ``room``) fit one batch of
    ``room``: llama-cpp-python packs them into one decode, as it would the whole list."""
    start, used = 0, 0
    for i, n in enumerate(counts):
        n = min(n, room)
        if i > start and used + n > room:
            yield start, i, used
            start, used = i, 0
        used += n
    if start < len(counts):
        yield start, len(counts), used


def yield_cpu() -> None:
    """Lower the calling thread's CPU priority (Linux, where a thread has its own nice value): for the
    runner's helper threads (the tokenizer, the prompt cache's writer, the pipe's writer), whose work can
    wait while the decode threads and the server, in another process, take the cores."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
        except OSError:
            pass
