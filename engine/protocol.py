"""The runner pipe's framing: length-prefixed pickles over a child's stdin and stdout. The pipe is the
runtime's one line to a runner: its ``client.py`` and the runner's ``process.py`` both import this module
(besides it, the runner's side takes from the server's side only the prompt cache folder's format,
``kvcache.py``; ``tests/test_import_graph.py`` holds the line).

Both ends are Fireside's own code in processes Fireside started, so pickle is safe here and keeps
the engine's dataclasses intact. The runner moves its real stdout out of the way at start-up (onto
stderr), so nothing llama.cpp prints can corrupt a frame.
"""

from __future__ import annotations

import pickle
import queue
import struct
import threading
from collections.abc import Callable
from typing import BinaryIO

_LEN = struct.Struct("<I")
MAX_FRAME = 256 * 1024 * 1024
# A rendered chat as a ``generate`` or ``tokenize`` frame carries it: ``[(text, parse_special), ...]``
# (``ChatTemplate.render_segments`` makes it; ``runner/tokens.py`` tokenizes it); a chat with images has
# ``types.Image`` objects between the segments (``images.place_images``; ``runner/vision.py`` tokenizes it)
Segments = list[tuple[str, bool]]


def prompt_chars(prompt: str | Segments) -> int:
    """How many characters ``prompt`` holds, segments summed."""
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(s[0]) for s in prompt if isinstance(s, tuple))


def max_prompt_chars(n_ctx: int, longest_piece: int) -> int:
    """The most characters a prompt that fits ``n_ctx`` tokens can have (no token covers more bytes than the
    vocabulary's longest piece, and a character is at least one byte: ``runner/tokens.py``)."""
    return n_ctx * max(1, longest_piece)


class PipeClosed(Exception):
    """The other end went away."""


class FramedPipe:
    """One reader and any number of writers (writes are serialized by a lock).

    With ``background``, a thread of the pipe's own writes the frames, in the order they were sent (each
    pickled by its sender, as it was then): the runner's, whose decode thread must not wait for a
    write. Writing to a pipe wakes its reader, and Linux places a pipe's reader on the writer's core
    expecting the writer to sleep (a sync wake-up); a decode thread does not sleep, so the parent's
    whole per-token work (reading, the reply's text, the HTTP write) ran on its core before it got the
    core back: a write took 0.15-0.6 ms of an 8-9 ms token on a 2-core EPYC. A hand-off to the writer
    thread is a plain wake-up. ``close`` writes what is queued first.

    ``writer_start`` runs first on that thread: the runner lowers its priority there (``yield_cpu``). Woken
    for every token at the priority of the decode threads, the writer took a core from one of them at
    once; at a lower one it writes when the scheduler next has room, a millisecond or two later. One
    stream decoded 1.4-3.6% faster a token (the starter, sampled, 16 interleaved pairs of ``fireside serve``,
    three runs at depth 0 and one at 2,048; the same comparison with nothing changed read 1.00x), 4
    greedy streams the same (1.00x), and a token's arrival at the client's 99th percentile was 1.5-3 ms
    later (17 -> 19.5 ms apart at depth 0).
    """

    def __init__(self, reader: BinaryIO, writer: BinaryIO, background: bool = False,
                 writer_start: Callable[[], None] | None = None):
        self.reader, self.writer = reader, writer
        self._writer_start = writer_start
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue | None = None
        self._broken: str | None = None  # why the background writer stopped
        self._writer_thread: threading.Thread | None = None
        if background:
            self._outbox = queue.SimpleQueue()
            self._writer_thread = threading.Thread(target=self._write_loop, name="fireside-pipe-writer", daemon=True)
            self._writer_thread.start()

    def send(self, message: dict) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        frame = _LEN.pack(len(data)) + data
        if self._outbox is None:
            self._write(frame)
        elif self._broken is not None:
            raise PipeClosed(self._broken)
        else:
            self._outbox.put(frame)

    def _write(self, frame: bytes) -> None:
        with self._lock:
            try:
                self.writer.write(frame)
                self.writer.flush()
            except (OSError, ValueError) as exc:
                raise PipeClosed(str(exc)) from exc

    def _write_loop(self) -> None:
        if self._writer_start is not None:
            self._writer_start()
        while (frame := self._outbox.get()) is not None:
            if self._broken is None:
                try:
                    self._write(frame)
                except PipeClosed as exc:  # the reader is gone: later sends say so
                    self._broken = str(exc) or "closed"

    def close(self, timeout: float = 5.0) -> None:
        """Write what the background writer still holds (within ``timeout``)."""
        if self._writer_thread is not None:
            self._outbox.put(None)
            self._writer_thread.join(timeout)

    def recv(self) -> dict:
        header = self._read_exact(_LEN.size)
        (n,) = _LEN.unpack(header)
        if n > MAX_FRAME:
            raise PipeClosed(f"frame of {n} bytes is past the cap")
        return pickle.loads(self._read_exact(n))

    def _read_exact(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            try:
                data = self.reader.read(left)
            except (OSError, ValueError) as exc:
                raise PipeClosed(str(exc)) from exc
            if not data:
                raise PipeClosed("end of stream")
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)
