"""Path safety for the library: repo ids, file names and model ids are hostile input until checked.

Repo ids and file names arrive from the hub, from API clients and from other apps' manifests. Before
anything touches the disk they are checked here: ``..`` and ``.`` parts, absolute paths, drive letters,
UNC paths, backslashes, NUL and control characters and over-long names are refused with ``UnsafePath``.
``safe_join`` then builds the path under a models root and refuses a result that resolves outside it,
which catches a symlink planted inside the root that points out of it. Model ids are never paths:
``is_path_like`` lets the library refuse ``../x``, ``/etc/passwd`` or ``C:\\x`` before any lookup.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..errors import UnsafePath

MAX_PART = 200  # bytes of one path component; most file systems allow 255
MAX_ID = 512
_DRIVE_RE = re.compile(r"^[A-Za-z]:([\\/]|$)")
_REPO_PART_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_WINDOWS_BAD = re.compile(r'[<>:"|?*]')  # ':' also names NTFS streams and drive-relative paths (C:x)
_DEVICES = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}


def is_path_like(text: str) -> bool:
    """True when ``text`` looks like a file-system path rather than a model id or alias."""
    if not text or len(text) > MAX_ID or _CONTROL_RE.search(text):
        return True
    if text.startswith(("/", "\\", "~")) or "\\" in text or _DRIVE_RE.match(text):
        return True
    parts = text.split("/")
    return any(p in ("", ".", "..") for p in parts)


def check_part(part: str, what: str = "name") -> str:
    """One path component from outside: refuse anything that could name another place."""
    if not isinstance(part, str) or not part:
        raise UnsafePath(f"empty {what}")
    if _CONTROL_RE.search(part):
        raise UnsafePath(f"{what} {part!r} contains a NUL or control character")
    if part in (".", "..") or "/" in part or "\\" in part or _WINDOWS_BAD.search(part):
        raise UnsafePath(f"{what} {part!r} is not a plain name (it could leave the models folder)")
    if part.split(".")[0].lower() in _DEVICES:
        raise UnsafePath(f"{what} {part!r} is a reserved device name on Windows")
    if len(part.encode("utf-8")) > MAX_PART:
        raise UnsafePath(f"{what} is {len(part.encode('utf-8'))} bytes long, past the {MAX_PART}-byte limit")
    if part != part.strip() or part.endswith("."):
        raise UnsafePath(f"{what} {part!r} has leading or trailing spaces or dots")
    return part


def check_repo_id(repo_id: str) -> tuple[str, str]:
    """A hub repo id ``publisher/repo``, split into its two checked parts."""
    if not isinstance(repo_id, str) or _CONTROL_RE.search(repo_id) or "\\" in repo_id:
        raise UnsafePath(f"repo id {repo_id!r} contains characters a repo id never has")
    parts = repo_id.split("/")
    if len(parts) != 2:
        raise UnsafePath(f"repo id {repo_id!r} must be publisher/repo")
    for p in parts:
        check_part(p, "repo id part")
        if not _REPO_PART_RE.match(p) or ".." in p:
            raise UnsafePath(f"repo id {repo_id!r} has a part the hub would not accept: {p!r}")
    return parts[0], parts[1]


def check_file_name(name: str) -> str:
    """A model file name from the hub; the hub allows folders, Fireside keeps only the last part.

    Every component is checked (so ``a/../../x.gguf`` is refused, not quietly shortened)."""
    if not isinstance(name, str) or not name:
        raise UnsafePath("empty file name")
    if name.startswith(("/", "\\")) or "\\" in name or _DRIVE_RE.match(name):
        raise UnsafePath(f"file name {name!r} is an absolute or Windows path")
    for part in name.split("/"):
        check_part(part, "file name part")
    return name.split("/")[-1]


def inside(path: Path, root: Path) -> bool:
    """True when ``path`` (symlinks resolved) lies inside ``root`` (symlinks resolved)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True


def safe_join(root: Path, *parts: str) -> Path:
    """``root/part/...`` after checking each part, refusing a result that resolves outside ``root``."""
    for p in parts:
        check_part(p)
    path = Path(root, *parts)
    # The final file may not exist yet; its parent may be a planted symlink, so check what exists.
    probe = path
    while not probe.exists() and not probe.is_symlink() and probe != root:
        probe = probe.parent
    if probe.is_symlink() or probe != root:
        if not inside(probe, root):
            raise UnsafePath(f"{path} resolves outside the models folder {root}")
    return path
