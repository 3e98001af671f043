"""The decode-thread controller on recorded step timings (issue 28): no clock, no model, no timed assertions.

Each machine below is a table of seconds per decode step by thread count. The starter model's rows
are measured on a 2-core EPYC: issue 28's llama-server figures (-t 1: 123 tok/s quiet, 117 with one
busy process; -t 2: 121 and 38.6), and Fireside's on the same machine crowded by other builds (a
load average of 10: 1 thread about 20 tok/s, 2 threads 1-3). The larger model's rows (a second
thread nearly doubles its speed on a quiet machine) and the four-core rows are modelled on those
shapes, not measured. A seeded noise of a few percent (and rare 3x stalls) sits on top.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fireside.engine.runner.threads import LOOK_S, PROBE_MAX_S, MachineLoad, ThreadController

SMALL = {"quiet": {1: 1 / 123, 2: 1 / 121}, "busy": {1: 1 / 117, 2: 1 / 38.6}}
LARGE = {"quiet": {1: 0.052, 2: 0.028}, "busy": {1: 0.056, 2: 0.085}}
# the same machine at a load average of 10 (other builds running): 1 thread 20 tok/s, 2 threads 1.7
CROWDED = {"quiet": {1: 1 / 123, 2: 1 / 121}, "busy": {1: 1 / 20, 2: 1 / 1.7}}
# the starter on a 2-core EPYC host on 2026-12-02, where a second thread pays: llama-bench -t 1 43 tok/s,
# -t 2 70; bench/busy.py's llama-server at 2 threads beside one busy process 17.8
PAYS = {"quiet": {1: 1 / 43, 2: 1 / 70}, "busy": {1: 1 / 40, 2: 1 / 17.8}}
FOUR = {"quiet": {1: 0.100, 2: 0.052, 3: 0.036, 4: 0.028}, "busy": {1: 0.104, 2: 0.055, 3: 0.039, 4: 0.090}}


def run(ctl: ThreadController, machine: dict, schedule: list[tuple[str, int]], seed: int = 1):
    """Feed ``ctl`` steps of ``machine`` along ``schedule`` ([(state, steps)]); returns each step's
    (state, threads, seconds)."""
    rng = random.Random(seed)
    trace = []
    for state, steps in schedule:
        for _ in range(steps):
            threads = ctl.threads
            seconds = machine[state][threads] * rng.gauss(1.0, 0.03)
            if rng.random() < 0.01:
                seconds *= 3  # a stall now and then (a page fault, an interrupt)
            ctl.observe(threads, seconds, 1)
            trace.append((state, threads, seconds))
    return trace


def share_on(trace, state: str, threads: int, last: int) -> float:
    steps = [t for s, t, _ in trace if s == state][-last:]
    return sum(1 for t in steps if t == threads) / len(steps)


def test_a_busy_process_moves_decoding_to_fewer_threads_and_quiet_brings_them_back():
    ctl = ThreadController(2)
    trace = run(ctl, LARGE, [("quiet", 300), ("busy", 300), ("quiet", 300)])
    assert share_on(trace[:300], "quiet", 2, 200) > 0.9  # a model that gains from 2 threads keeps them
    busy = trace[300:600]
    assert all(t == 1 for _, t, _ in busy[20:30])  # moved within a few steps of the process waking
    assert share_on(busy, "busy", 1, 250) > 0.9
    # back on a quiet machine: at 2 threads again within PROBE_MAX_S and a probe
    clock, back_at = 0.0, None
    for _, t, s in trace[600:]:
        if t == 2 and back_at is None:
            back_at = clock
        clock += s
    assert back_at is not None and back_at < PROBE_MAX_S[1] + 0.2
    assert share_on(trace[600:], "quiet", 2, 200) > 0.9


def test_a_long_busy_stretch_does_not_keep_decoding_on_one_thread_once_the_machine_is_quiet():
    """Probes up during the busy stretch lost (2 threads at 17.8 tok/s): once quiet, the next probe's own
    steps decide, not a smoothed time from the busy stretch (which kept one thread for about 10 s)."""
    for seed in range(3):
        ctl = ThreadController(2)
        trace = run(ctl, PAYS, [("quiet", 300), ("busy", 600), ("quiet", 300)], seed=seed)
        quiet, clock, settled = trace[900:], 0.0, None
        for i, (_, _, s) in enumerate(quiet):
            if settled is None and all(t2 == 2 for _, t2, _ in quiet[i:i + 20]):
                settled = clock
            clock += s
        assert settled is not None and settled < PROBE_MAX_S[1] + 0.5, (seed, settled)
        assert share_on(trace, "quiet", 2, 250) > 0.9


def test_a_small_model_that_gains_nothing_from_a_thread_does_not_take_it():
    ctl = ThreadController(2)
    trace = run(ctl, SMALL, [("quiet", 600)])
    assert share_on(trace, "quiet", 1, 400) > 0.9


@pytest.mark.parametrize("machine", [SMALL, LARGE, FOUR, CROWDED], ids=["starter", "1.7B", "four-cores", "crowded"])
@pytest.mark.parametrize("schedule", [
    [("quiet", 1000)],
    [("busy", 1000)],
    [("quiet", 200), ("busy", 200), ("quiet", 200), ("busy", 200), ("quiet", 200)],
], ids=["quiet", "busy", "changing"])
def test_never_slower_than_the_best_fixed_choice_by_more_than_noise(machine, schedule):
    most = max(machine["quiet"])
    adaptive = sum(s for _, _, s in run(ThreadController(most), machine, schedule))
    fixed = {n: sum(s for _, _, s in run(ThreadController(most, fixed=n), machine, schedule))
             for n in range(1, most + 1)}
    assert adaptive <= 1.06 * min(fixed.values()), (adaptive, fixed)


def test_four_cores_and_one_busy_process_settle_on_three_threads():
    ctl = ThreadController(4)
    trace = run(ctl, FOUR, [("quiet", 300), ("busy", 600)])
    assert share_on(trace[:300], "quiet", 4, 150) > 0.85
    assert share_on(trace, "busy", 3, 300) > 0.85


def test_a_users_thread_count_is_never_moved():
    ctl = ThreadController(2, fixed=2)
    trace = run(ctl, LARGE, [("quiet", 100), ("busy", 300)])
    assert {t for _, t, _ in trace} == {2}
    assert ctl.limit(1) == 2  # another model decoding does not move it either (the budget counts it)
    assert ctl.limit(4) == 2


def test_the_runners_share_caps_the_count_and_room_is_used_again():
    ctl = ThreadController(2)
    run(ctl, LARGE, [("quiet", 200)])
    assert ctl.threads == 2
    assert ctl.limit(1) == 1  # another model started decoding: this runner's share is one core
    trace = run(ctl, LARGE, [("quiet", 200)])
    assert {t for _, t, _ in trace} == {1}
    ctl.limit(2)  # the other model finished
    trace = run(ctl, LARGE, [("quiet", 100)])
    assert share_on(trace, "quiet", 2, 80) > 0.9


def test_steps_of_several_streams_are_measured_apart_from_single_ones():
    """A step of 4 tokens is not slower per step because of threads: it is a different step."""
    ctl = ThreadController(2)
    rng = random.Random(3)
    for i in range(600):
        tokens = 4 if i % 2 else 1  # streams come and go
        threads = ctl.threads
        per_step = LARGE["quiet"][threads] * (1.6 if tokens == 4 else 1.0) * rng.gauss(1, 0.02)
        ctl.observe(threads, per_step, tokens)
    assert ctl.threads == 2


def _long_prompt(ctl: ThreadController, chunks: int = 45, busy: range = range(0), seed: int = 5):
    """A prompt of ``chunks`` 512-token chunks on a 2-core machine, each chunk's time per token growing with
    its depth (attention): modelled on the starter's 8,192-token prompt on an f16 cache in 66 s at 2
    threads (2026-12-04, 2-core EPYC), a thread alone about 1.75x slower; ``busy`` chunks run beside a
    busy process (2 threads 3.5x slower, 1 thread 1.1x). Returns each chunk's (threads, seconds)."""
    rng = random.Random(seed)
    trace = []
    for i in range(chunks):
        depth = i * 512
        per_token = {1: 0.0045 + depth * 1.0e-6, 2: 0.0026 + depth * 0.55e-6}
        if i in busy:
            per_token = {1: per_token[1] * 1.1, 2: per_token[2] * 3.5}
        threads = ctl.threads
        seconds = per_token[threads] * 512 * rng.gauss(1.0, 0.03)
        ctl.observe(threads, seconds, 512)
        trace.append((threads, seconds))
    return trace


def test_a_long_prompt_whose_chunks_take_seconds_stays_on_the_faster_count():
    """Claude Code's 22k-token first request flipped between 1 and 2 threads 213 times: each chunk took
    longer than FRESH_S, so the count a probe left was stale when the probe ended (its loss never counted,
    the next probe came a chunk later), and the slowly smoothed time, behind the depth's growth, looked
    like a busier machine. The whole prompt cost 1.5x what 2 fixed threads took."""
    auto = sum(s for _, s in _long_prompt(ThreadController(2)))
    fixed = sum(s for _, s in _long_prompt(ThreadController(2, fixed=2)))
    assert auto <= 1.08 * fixed, (auto, fixed)


def test_a_busy_process_during_a_long_prompt_still_moves_it_to_one_thread():
    trace = _long_prompt(ThreadController(2), chunks=45, busy=range(15, 35))
    assert [t for t, _ in trace[14:16]] == [2, 2]  # the first busy chunk is what shows it
    assert sum(1 for t, _ in trace[17:35] if t == 1) >= 15


# two busy processes beside the starter: a lost probe's one step on two threads took 100-200 ms here
HEAVY = {"quiet": {1: 1 / 43, 2: 1 / 70}, "busy": {1: 1 / 28, 2: 1 / 6}}


def _just_after_a_lost_probe(ctl: ThreadController) -> None:
    run(ctl, HEAVY, [("quiet", 300), ("busy", 300)])
    for _ in range(400):  # on until a probe of two threads has just lost
        run(ctl, HEAVY, [("busy", 1)])
        if ctl.probe is None and ctl.next_at[1] - ctl.clock > 2.0:
            return
    raise AssertionError("no lost probe left a wait of over 2 s")


def test_a_quiet_machine_seen_by_its_load_is_probed_at_once_however_long_the_wait_was():
    alone = ThreadController(2)
    _just_after_a_lost_probe(alone)
    waiting = run(alone, HEAVY, [("quiet", 60)])  # 1.4 s
    assert {t for _, t, _ in waiting} == {1}  # with no hint, more than a second of quiet on one thread
    ctl = ThreadController(2)
    _just_after_a_lost_probe(ctl)
    ctl.quiet()
    trace = run(ctl, HEAVY, [("quiet", 60)])
    assert [t for _, t, _ in trace[1:4]] == [2, 2, 2] and share_on(trace, "quiet", 2, 50) > 0.9


def test_a_users_fixed_count_ignores_the_hint():
    ctl = ThreadController(2, fixed=1)
    ctl.quiet()
    assert run(ctl, HEAVY, [("quiet", 20)])[-1][1] == 1


class _Stat:
    """A /proc/stat whose first line the test writes, with its own clocks."""

    def __init__(self, tmp_path):
        self.path, self.now, self.own, self.busy_s = tmp_path / "stat", 0.0, 0.0, 0.0
        self.write()

    def write(self):
        hz = os.sysconf("SC_CLK_TCK")
        self.path.write_text(f"cpu  {int(self.busy_s * hz)} 0 0 999999 0 0 0 0 0 0\ncpu0 0 0 0 0\n")

    def tick(self, seconds: float, others: float, own: float):
        self.now += seconds
        self.own += own * seconds
        self.busy_s += (others + own) * seconds
        self.write()


def test_machine_load_says_quiet_once_when_other_processes_stop(tmp_path):
    stat = _Stat(tmp_path)
    load = MachineLoad(str(stat.path), clock=lambda: stat.now, own=lambda: stat.own)
    seen = []
    for others in [0.1] * 4 + [1.0] * 8 + [0.7] * 4 + [0.05] * 8 + [1.0] * 4 + [0.2] * 4:
        stat.tick(LOOK_S, others, own=1.9)  # the runner's own two threads never count
        seen.append(load.went_quiet())
    assert seen.count(True) == 2  # busy (1.0, then 0.7: still busy) -> quiet, and again
    assert seen.index(True) == 16 and seen[16:].index(True, 1) == 12


def test_machine_load_without_proc_stat_never_hints(tmp_path):
    load = MachineLoad(str(tmp_path / "missing"))
    assert load.others() is None and not load.went_quiet()


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc/stat")
def test_machine_load_sees_a_real_busy_process():
    load = MachineLoad()
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.6)
        load.others()  # from here on the spinner has started
        time.sleep(0.6)
        assert load.others() > 0.5
    finally:
        spinner.kill()
        spinner.wait()


class _EmbedMachine:
    """A fake llama.cpp context to embed with, on a clock it moves itself: each token takes ``per_token[n]``
    seconds on ``n`` threads (the count ``llama_set_n_threads`` last set). Records each call's inputs."""

    def __init__(self, per_token: dict[int, float]):
        self.per_token, self.now, self.threads, self.calls = per_token, 0.0, 1, []

    def set_threads(self, _ctx, n_threads: int, _n_batch: int) -> None:
        self.threads = n_threads

    def embed(self, texts: list[str], normalize: bool = True) -> list[list[float]]:
        self.calls.append((list(texts), self.threads))
        self.now += self.per_token[self.threads] * sum(min(256, len(t.split())) for t in texts)
        return [[float(t.split()[0])] for t in texts]


def _step_threads(monkeypatch, per_token: dict[int, float]):
    from fireside.engine.runner import threads

    machine = _EmbedMachine(per_token)
    monkeypatch.setattr("llama_cpp.llama_set_n_threads", machine.set_threads)
    monkeypatch.setattr(threads.time, "perf_counter", lambda: machine.now)
    steps = threads.StepThreads(ctx=None, most=2)
    steps.load = None  # no /proc/stat hint: the steps' own times decide
    return steps, machine


def test_a_long_embedding_moves_to_one_thread_within_the_call_when_two_are_slower(monkeypatch):
    """The busy shared machine of issue 44: two threads took three times one's time per passage. Within one
    call of 40 passages the runner finds that and embeds the most of them on one thread (timed a call at
    once, all 40 ran on two), and every passage still gets its own vector, in order."""
    steps, machine = _step_threads(monkeypatch, {1: 0.0003, 2: 0.001})
    texts = [f"{i} " + "word " * 300 for i in range(40)]  # each past the 256-token batch: a step each
    vectors = steps.embed(machine, texts, [301] * 40, 256, True)
    assert [v[0] for v in vectors] == list(range(40))
    on_one = sum(len(t) for t, threads in machine.calls if threads == 1)
    assert on_one >= 30


def test_short_passages_share_a_step_and_a_cancelled_embedding_stops_between_steps(monkeypatch):
    import threading

    steps, machine = _step_threads(monkeypatch, {1: 0.001, 2: 0.0006})
    vectors = steps.embed(machine, [f"{i} a b" for i in range(8)] + ["8 " + "w " * 300], [4] * 8 + [301], 256, True)
    assert [len(texts) for texts, _ in machine.calls] == [8, 1]  # eight short ones in one batch, the long one alone
    assert [v[0] for v in vectors] == list(range(9))
    stop = threading.Event()
    stop.set()
    assert steps.embed(machine, ["9 a"], [2], 256, True, stop) is None
