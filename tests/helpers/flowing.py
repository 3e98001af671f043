"""Another client's stream, watched while a hostile request is served: a streamed chat on its own thread
that notes when each chunk arrived, so a test can assert the worst gap while something else ran (issue
42: the server must not stall one client while another's documents, images or predictions are handled).
It also reads the test process's resident memory and CPU time (the servers under test run in it), and
finds the document reader processes it started (``documents/reader_process.py``)."""

from __future__ import annotations

import statistics
import threading
import time

import openai
import psutil

MAX_GAP_S = 1.0  # the worst wait between two chunks while the other request runs, on a quiet machine
BUSY_GAPS = 4    # on a shared machine where a token alone takes longer: this many of the stream's usual gaps
NOISE = 2        # or twice the worst gap the stream had with nothing else sent (before and after)
AROUND = 12      # chunks watched before the other request is sent and after it is answered


class Stream(threading.Thread):
    """A long streamed chat; ``stop`` ends it ``AROUND`` chunks later. ``started`` is set after
    ``AROUND`` chunks, so the gaps on either side of the other request show what the machine does to the
    stream without it (the suite's other worker, a shared host)."""

    def __init__(self, base_url: str, max_tokens: int = 2000):
        super().__init__(daemon=True)
        self.client = openai.OpenAI(base_url=f"{base_url}/v1", api_key="x", max_retries=0, timeout=300)
        self.max_tokens = max_tokens
        self.times: list[float] = []
        self.started, self.stop = threading.Event(), threading.Event()
        self.after_stop = 0

    def run(self) -> None:
        chunks = self.client.chat.completions.create(
            model="starter", stream=True, max_tokens=self.max_tokens, temperature=0,
            messages=[{"role": "user", "content": "Write a long story about a lighthouse keeper."}])
        for _ in chunks:
            self.times.append(time.monotonic())
            if len(self.times) > AROUND:
                self.started.set()
            self.after_stop += self.stop.is_set()
            if self.after_stop > AROUND:
                chunks.close()
                return

    def __enter__(self) -> Stream:
        self.start()
        assert self.started.wait(120), "the watching stream never started"
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.join(120)

    def gap_during(self, start: float, end: float) -> float:
        """The longest wait for a chunk that overlaps ``[start, end]``, counted from ``start`` at the
        earliest: the other request cannot have delayed the stream before it was sent."""
        pairs = zip(self.times, self.times[1:])
        return max((b - max(a, start) for a, b in pairs if b >= start and a <= end), default=0.0)

    def allowed_gap(self, start: float, end: float) -> float:
        """``MAX_GAP_S``; on a machine so busy that the stream is slow or jerky without the other request,
        ``BUSY_GAPS`` of its usual gaps or ``NOISE`` times its worst gap outside ``[start, end]``. The
        stalls this guards against were 4-20 s, each far past the stream's own worst."""
        alone = [b - a for a, b in zip(self.times[1:], self.times[2:]) if b < start or a > end]  # not the first token's
        if not alone:
            return MAX_GAP_S
        return max(MAX_GAP_S, BUSY_GAPS * statistics.median(alone), NOISE * max(alone))

    def assert_flowed(self, start: float, end: float) -> None:
        assert self.after_stop > AROUND, "the stream must outlast the other request"
        gap = self.gap_during(start, end)
        assert gap < self.allowed_gap(start, end), f"the other client's stream stalled {gap:.2f} s"
        assert any(start <= t <= end for t in self.times) or end - start < MAX_GAP_S, "no chunk came meanwhile"


def rss() -> int:
    """This process's resident memory, in bytes."""
    return psutil.Process().memory_info().rss


def cpu_s() -> float:
    """The CPU time this process has used, user and system, in seconds."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


def tree_cpu_s() -> float:
    """The CPU time this process and every process under it (runners, document readers) have used, in
    seconds; a process that ended meanwhile no longer counts, so compare over a span where none ends."""
    total = cpu_s()
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # ended meanwhile
            continue
        total += times.user + times.system
    return total


def reader_processes() -> list[psutil.Process]:
    """The document reader processes under this process that are still running."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "fireside.engine.documents.reader_process" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child)
        except psutil.Error:
            continue
    return found


def ended(proc: psutil.Process) -> bool:
    """Whether ``proc`` has ended (a zombie not yet reaped counts as ended)."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def busiest_reader() -> psutil.Process:
    """The reader process that has used the most CPU: the one reading a slow file."""
    readers = reader_processes()
    assert readers, "no document reader process is running"
    return max(readers, key=lambda p: sum(p.cpu_times()[:2]))


def peak_rss_during(fn, *args, **kwargs) -> tuple[object, int]:
    """``fn(*args, **kwargs)``'s result and how far this process's resident memory rose above where it
    started while it ran (sampled every 5 ms)."""
    start, peak, done = rss(), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            done.wait(0.005)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        result = fn(*args, **kwargs)
    finally:
        done.set()
        sampler.join()
    return result, max(0, max(peak[0], rss()) - start)
