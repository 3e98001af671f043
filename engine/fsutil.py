"""Replacing a file so that a crash or a power cut leaves either the old file or the new one, never a
torn mix: write a temporary file beside it, fsync it, rename it over the old one, fsync the folder.

Every file Fireside replaces goes through ``atomic_write``: the app's preferences, the remotes
registry, chat exports, the downloader's sidecars and the per-machine workarounds and attention
choices (read back with ``read_json_object``). ``os.replace`` alone is atomic against other
processes but not against a power cut: without the fsyncs, a journaling file system may commit the
rename before the data, and the file comes back empty.

Threading: any thread; concurrent writers of one path each win whole (the last rename stays).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write(path: Path | str, data: str | bytes | Iterable[bytes | memoryview], encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``data``, durably. The old file stays intact if anything fails first.
    ``data`` may be byte chunks (a list, or a generator that paces them), written in order (a large
    buffer then needs no joined copy)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    chunks = [data.encode(encoding) if isinstance(data, str) else data] if isinstance(data, (str, bytes)) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def read_json_object(path: Path | str, log: logging.Logger) -> dict:
    """The JSON object in ``path``; {} when the file is missing, and {} with a warning on ``log`` when it is
    unreadable or holds something else (a file Fireside remembers things in must never stop a load)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def fsync_dir(folder: Path | str) -> None:
    """Make a rename in ``folder`` durable. Windows cannot open a folder for fsync; NTFS journals the
    rename with the data there, so skipping it loses nothing."""
    if os.name == "nt":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
