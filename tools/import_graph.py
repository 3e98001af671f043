"""The engine's house rules for imports, read from the source with ``ast`` (nothing is imported):

- a wing (a package under ``engine/``: ``runtime/``, ``prompts/``, ``documents/``, ...) is entered by its face
  (its ``__init__.py``): code outside a wing (another wing, ``cli/``, ``server/``, the app) imports the face or
  the ground floor's value modules (``GROUND``), never a wing's inner module;
- no import circle, between engine packages or between any two engine modules.

``tests/test_import_graph.py`` holds both rules; run this script to see every offending import::

    python tools/import_graph.py    # one line per offending import: file:line, importer -> imported

There are no exceptions: the list of known inner imports the rule came in with (issue 46) is paid.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"fireside.engine": ROOT / "engine", "fireside.app": ROOT / "app"}
ENGINE = "fireside.engine"
# the ground floor: value modules anyone may import (protocol.py is the pipe between Fireside's processes, ggml.py
# the device API both sides of it read)
GROUND = {"types", "errors", "settings", "fmt", "fsutil", "deps", "faces", "protocol", "ggml"}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imports(name: str, path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` for every import in ``path`` (inside functions too), made absolute."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            prefix = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join(prefix + ([node.module] if node.module else []))
            out.append((node.lineno, module, [alias.name for alias in node.names]))
    return out


def wing_of(name: str, known: dict[str, Path]) -> str | None:
    """``fireside.engine.runtime.client`` -> ``fireside.engine.runtime``; None for a top-level engine module
    (``facade``, ``types``) or anything outside the engine."""
    parts = name.split(".")
    if parts[:2] != ["fireside", "engine"] or len(parts) < 3:
        return None
    wing = ".".join(parts[:3])
    return wing if (known.get(wing) and known[wing].name == "__init__.py") else None


def offered(face: Path) -> set[str]:
    """The names in a face's ``__all__`` (a list of strings at its top level)."""
    for node in ast.parse(face.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            if isinstance(node.value, (ast.List, ast.Tuple)):
                return {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
    return set()


def _targets(module: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """The modules an import statement loads: ``from wing import inner`` loads ``wing.inner``, unless the
    face offers ``inner`` in its ``__all__`` (a face may offer a module: ``runner``'s ``kvcache``)."""
    face = offered(known[module]) if module in known and known[module].name == "__init__.py" else set()
    found = [f"{module}.{n}" for n in names if f"{module}.{n}" in known and n not in face]
    return found or ([module] if module in known else [])


def inner_imports(known: dict[str, Path] | None = None) -> list[tuple[str, int, str, str]]:
    """``(importer, line, imported, names)`` for every import of a wing's inner module from outside the wing."""
    known = modules() if known is None else known
    found = []
    for name, path in known.items():
        for line, module, names in imports(name, path):
            for target in _targets(module, names, known):
                wing = wing_of(target, known)
                if wing is None or target == wing or wing_of(name, known) == wing:
                    continue
                found.append((name, line, target, ", ".join(n for n in names if f"{module}.{n}" != target)))
    return sorted(found)


def face_breaches(known: dict[str, Path] | None = None) -> list[str]:
    """Every import of a wing's inner module from outside the wing, as a readable line."""
    known = modules() if known is None else known
    return [f"{importer} (line {line}) imports {target} [{names}]: import it from {wing_of(target, known)}"
            for importer, line, target, names in inner_imports(known)]


def main(argv: list[str]) -> int:
    known = modules()
    found = inner_imports(known)
    for importer, line, target, names in found:
        print(f"{known[importer].relative_to(ROOT)}:{line}: {importer} -> {target} [{names}]")
    print(f"{len(found)} imports of a wing's inner module from outside it")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
