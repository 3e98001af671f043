"""Rewrite imports, dotted module names and source paths after modules moved (issue 46: runtime/ split into
wings by job), so that the same rewrite can be run again on a tree that merged other branches' work.

``MOVES`` is the one old -> new module map; a key covers its submodules (``fireside.engine.runtime.runner``
moves the whole runner package). For each Python file under ``FOLDERS`` the script

1. rewrites ``from ... import`` statements whose module (or an imported submodule) moved, keeping relative
   imports relative; in the engine and the app, a moved name a caller outside its wing imports comes from
   the wing's face when the face offers it (``tools/import_graph.py``'s rule). A relative import in a file that itself moved may still be written against the file's
   old place (an edit merged in from a branch that did not know of the move): an import that does not
   resolve where the file is now is resolved where it was, then mapped;
2. rewrites dotted names in any text (``"fireside.engine.runtime.runner"`` in a ``python -m`` command, a
   ``monkeypatch.setattr`` target, the PyInstaller spec);
3. rewrites source paths in comments and docs (``runtime/runner/batch.py`` -> ``runner/batch.py``,
   ``tests/engine/runtime/test_kvcache.py`` -> ``tests/engine/runner/test_kvcache.py``, ``PATH_MOVES``).

It moves no files: ``--check`` lists files still at an old place (a module another branch added there),
to be moved with ``git mv`` before the rewrite. Running it twice changes nothing the second time.

Usage, from the repository root::

    python tools/rewrite_imports.py            # rewrite in place, print the files changed
    python tools/rewrite_imports.py --check    # change nothing; exit 1 if anything is left to rewrite or move
    ruff check --fix --select I engine app tests bench tools   # then sort the rewritten imports
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> the module name it holds
PACKAGES = {"engine": "fireside.engine", "app": "fireside.app", "tests": "tests", "bench": "bench", "fuzz": "fuzz",
            "tools": "tools", "installers": "installers"}
TEXT_FILES = ("README.md", "pyproject.toml", "docs", "installers", ".ci")
TEXT_SUFFIXES = {".py", ".md", ".spec", ".toml", ".txt", ".cfg", ""}

_R, _E, _T = "fireside.engine.runtime", "fireside.engine", "tests.engine"
MOVES: dict[str, str] = {
    # the runner process, with the prompt cache folder's format (both sides of the pipe read it)
    f"{_R}.runner": f"{_E}.runner",
    f"{_R}.kvcache": f"{_E}.runner.kvcache",
    # the pipe every Fireside process speaks: the ground floor
    f"{_R}.protocol": f"{_E}.protocol",
    # turning messages into prompts
    **{f"{_R}.{m}": f"{_E}.prompts.{m}" for m in ("templates", "renderer", "sandbox", "images")},
    # structured output: grammars, schemas, reply checks, reasoning and tool calls in a reply
    **{f"{_R}.{m}": f"{_E}.structured.{m}"
       for m in ("grammar", "grammarcheck", "schemakeys", "strictjson", "replycheck", "limits", "parsing")},
    # the tests follow their modules
    **{f"{_T}.runtime.test_{t}": f"{_T}.runner.test_{t}"
       for t in ("batching", "draft_model", "drafter", "drafts", "gather", "pieces", "runner_launch", "threads",
                 "vision", "vision_mrope", "kvcache")},
    **{f"{_T}.runtime.test_{t}": f"{_T}.structured.test_{t}"
       for t in ("grammar_dead_end", "grammar_limits", "no_call_grammar", "parsing", "parsing_echo",
                 "schema_keywords", "strictjson")},
    **{f"{_T}.runtime.test_{t}": f"{_T}.prompts.test_{t}" for t in ("template_budgets", "prompt_tokens")},
    # the fuzzers measure nothing: out of bench/
    **{f"bench.fuzz_{f}": f"fuzz.fuzz_{f}" for f in ("api", "gguf", "grammar", "template")},
}
# paths that are not modules' paths under engine/ or tests/engine/
PATH_MOVES = {"bench/fuzz_": "fuzz/fuzz_"}


def moved(name: str) -> str:
    """``name``'s new name (the longest key of ``MOVES`` covering it), or ``name`` when it did not move."""
    for old in sorted(MOVES, key=len, reverse=True):
        if name == old or name.startswith(old + "."):
            return MOVES[old] + name[len(old):]
    return name


def was(name: str) -> str:
    """The inverse of ``moved``: where the module now called ``name`` used to be."""
    for old, new in sorted(MOVES.items(), key=lambda kv: len(kv[1]), reverse=True):
        if name == new or name.startswith(new + "."):
            return old + name[len(new):]
    return name


def module_files() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if ".venv" in path.parts:
                continue
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _top_names(path: Path) -> set[str]:
    """The names a module binds at its top level, and those its face's ``_WHERE`` table offers."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in targets) and isinstance(node.value, ast.Dict):
                names |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return names


class Rewriter:
    def __init__(self) -> None:
        self.modules = module_files()
        self._names: dict[str, set[str]] = {}

    def resolves(self, module: str, names: list[str]) -> bool:
        """Whether ``from module import names`` works in the tree as it is now."""
        if module not in self.modules:
            return False
        if module not in self._names:
            self._names[module] = _top_names(self.modules[module])
        return all(f"{module}.{n}" in self.modules or n in self._names[module] for n in names)

    def statement(self, here: str, is_package: bool, node: ast.ImportFrom) -> list[tuple[str, str]] | None:
        """The (module, names) of the statements replacing ``node`` in module ``here``, or None to keep it."""
        names = [a.name for a in node.names]
        via_old = False
        if node.level:
            target = _absolute(here, is_package, node.level, node.module)
            if self.resolves(target, names) or names == ["*"]:
                return None
            target, via_old = _absolute(was(here), is_package, node.level, node.module), True
        else:
            target = node.module or ""
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            full = moved(f"{target}.{alias.name}")
            if full != f"{target}.{alias.name}" and full.rsplit(".", 1)[1] == alias.name:
                parent = full.rsplit(".", 1)[0]  # a submodule that moved on its own
            else:
                parent = moved(target)
            groups.setdefault(parent, []).append(alias.name if not alias.asname else f"{alias.name} as {alias.asname}")
        if list(groups) == [target] and not via_old:
            return None
        groups = self._faces(here, groups) if here.startswith(("fireside.engine.", "fireside.app.")) else groups
        if node.level:
            return [(_relative(here, is_package, m), ", ".join(n)) for m, n in groups.items()]
        return [(m, ", ".join(n)) for m, n in groups.items()]

    def _faces(self, here: str, groups: dict[str, list[str]]) -> dict[str, list[str]]:
        """Names imported from a wing's inner module by a caller outside the wing come from the wing's face
        when the face offers them all (``tools/import_graph.py`` holds that rule)."""
        out: dict[str, list[str]] = {}
        for module, names in groups.items():
            parts = module.split(".")
            face = ".".join(parts[:3])
            outside = not here.startswith(face + ".") and here != face
            if (parts[:2] == ["fireside", "engine"] and len(parts) > 3 and outside and face in self.modules
                    and self.resolves(face, [n.split(" as ")[0] for n in names])
                    and not any(f"{module}.{n.split(' as ')[0]}" in self.modules for n in names)):
                module = face
            out.setdefault(module, []).extend(names)
        return out

    def rewrite_imports(self, name: str, path: Path, text: str) -> str:
        tree = ast.parse(text)
        lines = text.splitlines(keepends=True)
        edits = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                new = self.statement(name, path.name == "__init__.py", node)
                if new is not None:
                    edits.append((node, new))
        for node, new in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
            first, last = node.lineno - 1, node.end_lineno - 1
            indent = lines[first][:node.col_offset]
            tail = lines[last][node.end_col_offset:]
            body = [f"from {m} import {n}" for m, n in new]
            if len(new) == 1 and len(node.names) > 1 and first != last:
                # keep a wrapped name list as it was written; only the module changes
                head = re.sub(r"^(\s*from\s+)[.\w]+", lambda m, to=new[0][0]: m.group(1) + to, lines[first])
                lines[first] = head
                continue
            lines[first:last + 1] = [indent + f"\n{indent}".join(body) + tail]
        return "".join(lines)


def _absolute(here: str, is_package: bool, level: int, module: str | None) -> str:
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[:len(base) - level + 1]
    return ".".join(base + ([module] if module else []))


def _relative(here: str, is_package: bool, target: str) -> str:
    base = here.split(".") if is_package else here.split(".")[:-1]
    parts = target.split(".")
    common = 0
    while common < min(len(base), len(parts)) and base[common] == parts[common]:
        common += 1
    return "." * (len(base) - common + 1) + ".".join(parts[common:])


_DOTTED = re.compile(r"(?<![\w.])((?:fireside\.engine\.runtime|tests\.engine\.runtime)(?:\.\w+)+)")
_PATH = re.compile(r"(?<![\w/.])((?:tests/)?(?:engine/)?)runtime/((?:\w+/)*\w+\.py|runner/)")


def rewrite_text(text: str) -> str:
    text = _DOTTED.sub(lambda m: moved(m.group(1)), text)

    def path(m: re.Match) -> str:
        prefix, rest = m.group(1), m.group(2)
        base = _T if prefix.startswith("tests/") else _E
        old = ".".join([base, "runtime", *rest.removesuffix(".py").rstrip("/").split("/")])
        new = moved(old)
        if new == old:
            return m.group(0)
        tail = new[len(base) + 1:].replace(".", "/") + (".py" if rest.endswith(".py") else "/")
        return prefix + tail
    text = _PATH.sub(path, text)
    for old, new in PATH_MOVES.items():
        text = text.replace(old, new)
    return text


def _text_files() -> list[Path]:
    found = [p for folder in PACKAGES for p in (ROOT / folder).rglob("*") if p.is_file() and ".venv" not in p.parts]
    for entry in TEXT_FILES:
        p = ROOT / entry
        found += [p] if p.is_file() else [q for q in p.rglob("*") if q.is_file()] if p.is_dir() else []
    return sorted({p for p in found if p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts})


def left_at_old_places(modules: dict[str, Path]) -> list[str]:
    return sorted(f"{path.relative_to(ROOT)} -> {moved(name)}" for name, path in modules.items() if moved(name) != name)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_known_args(argv)[1]
    check = "--check" in args
    rewriter = Rewriter()
    stranded = left_at_old_places(rewriter.modules)
    for line in stranded:
        print(f"still at its old place, git mv it: {line}")
    changed = []
    by_path = {path: name for name, path in rewriter.modules.items()}
    for path in _text_files():
        if path in (Path(__file__).resolve(), ROOT / "tests" / "tools" / "test_rewrite_imports.py"):
            continue  # they spell the old names on purpose
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = text
        if path in by_path:
            new = rewriter.rewrite_imports(by_path[path], path, new)
        new = rewrite_text(new)
        if new != text:
            changed.append(path.relative_to(ROOT))
            if not check:
                path.write_text(new, encoding="utf-8")
    for path in changed:
        print(f"{'to rewrite' if check else 'rewrote'}: {path}")
    return 1 if check and (changed or stranded) else 0


if __name__ == "__main__":
    sys.exit(main())
