"""Open model files safely: only regular files, and never with a read that can block.

A models folder is shared with other apps and with whatever the user drops into it. A named pipe
(FIFO) called ``x.gguf`` would block the first ``open`` for reading until some writer appears, which
hung every model request; a device, a socket or a folder with a ``.gguf`` name is no model either.
``open_regular`` checks the path with ``stat`` first (so a device is never even opened), then opens it
with ``O_NONBLOCK`` and checks the open file again with ``fstat``: a FIFO swapped in between the two
steps opens at once instead of blocking, and is refused. ``O_NONBLOCK`` changes nothing for reads of
a regular file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from ..errors import InvalidModelFile

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)


def kind(mode: int) -> str:
    """What a file of this mode is, in words."""
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def not_regular(path: Path | str) -> str | None:
    """Why ``path`` (links followed) cannot be a model file, or None for a regular file. Never opens it."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"cannot read: {exc.strerror or exc}"
    if stat.S_ISREG(mode):
        return None
    return f"is {kind(mode)}, not a regular file; only regular files are read as models"


def open_regular(path: Path | str) -> tuple[BinaryIO, int]:
    """``path`` opened for binary reading, and its size; ``InvalidModelFile`` for anything but a
    regular file, without blocking."""
    name = Path(path).name
    why = not_regular(path)
    if why:
        raise InvalidModelFile(f"{name}: {why}")
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        raise InvalidModelFile(f"{name}: cannot read: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced after the first check
            raise InvalidModelFile(f"{name}: is {kind(st.st_mode)}, not a regular file; only regular files "
                                   f"are read as models")
        return os.fdopen(fd, "rb"), st.st_size
    except BaseException:
        os.close(fd)
        raise


def read_small(path: Path | str, cap: int) -> bytes:
    """A small regular file's bytes (a manifest, a ref), at most ``cap`` of them, without blocking."""
    fh, size = open_regular(path)
    with fh:
        if size > cap:
            raise InvalidModelFile(f"{Path(path).name}: {size:,} bytes, more than the {cap:,} expected")
        return fh.read(cap + 1)[:cap]
