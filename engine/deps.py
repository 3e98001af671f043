"""The dependency floors that matter for safety, checked at start-up.

pip enforces ``pyproject.toml``'s floors only when it installs Fireside; a later ``pip install`` of
something else, a distribution's older package or a hand-made environment can still leave an older
release in place, and then a download, a template or a GGUF header fails deep inside a library with a
message nobody can act on. ``check_floors()`` compares what is installed with the floors below (a test
keeps them equal to ``pyproject.toml``'s) and returns one plain sentence per problem, naming the
package, both versions, why the floor exists and the command that fixes it. The CLI prints them and
stops before running a command.

Threading: pure reads of package metadata; any thread.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import metadata

# distribution name -> (floor, what an older release gets wrong)
FLOORS: dict[str, tuple[str, str]] = {
    "llama-cpp-python": ("0.3.32", "older releases carry template-injection and GGUF parsing CVEs"),
    "jinja2": ("3.1.6", "older releases let a chat template escape the sandbox"),
    "huggingface-hub": ("0.30", "older releases lack the hub API Fireside uses for files, sizes and hashes"),
    "httpx": ("0.27", "older releases lack the streaming and redirect behaviour downloads rely on"),
    "pillow": ("10.3", "older releases carry image decoder CVEs, and every image a client sends is decoded with it"),
}


def version_tuple(version: str) -> tuple[int, ...]:
    """``"0.3.36"`` -> ``(0, 3, 36)``; ``"2.4.0rc1"`` -> ``(2, 4, 0)`` (a pre-release counts as its release)."""
    parts = []
    for piece in version.split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def check_floors(installed: Callable[[str], str] = metadata.version) -> list[str]:
    """One sentence per package older than its floor (or missing); empty when all is well."""
    problems = []
    for name, (floor, why) in FLOORS.items():
        try:
            have = installed(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed, and Fireside needs {floor} or newer: "
                            f'pip install "{name}>={floor}"')
            continue
        if version_tuple(have) < version_tuple(floor):
            problems.append(f"{name} {have} is installed, but Fireside needs {floor} or newer ({why}): "
                            f'pip install --upgrade "{name}>={floor}"')
    return problems
