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
import struct
import threading
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
    """One reader and any number of writers (writes are serialized by a lock)."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO):
        self.reader, self.writer = reader, writer
        self._lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            try:
                self.writer.write(_LEN.pack(len(data)) + data)
                self.writer.flush()
            except (OSError, ValueError) as exc:
                raise PipeClosed(str(exc)) from exc

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
