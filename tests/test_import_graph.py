"""Imports run one way: no two engine packages import each other (directly or round a longer loop), and
no two app modules do; and the app has one door to the engine: its windows and chat widgets import the
engine's value types (``types``, ``errors``, ``fmt``) and reach everything else through ``app/bridge/``. Every ``import`` counts, including those inside functions, since a deferred
import is still a dependency (deferring one is how a loop used to hide: Settings and Remotes pages).
The graph is read from the source with ``ast``; nothing is imported. A wing is entered by its face: the rule
and its list of known exceptions are ``tools/import_graph.py``'s."""

from __future__ import annotations

import ast
from pathlib import Path

from tools import import_graph

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"fireside.engine": ROOT / "engine", "fireside.app": ROOT / "app"}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [p for p in path.relative_to(folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def _imported(name: str, path: Path) -> set[str]:
    """Every module name ``path`` imports, relative imports made absolute; ``from x import y`` counts
    both ``x`` and ``x.y`` (``y`` may be a module)."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            prefix = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join(prefix + ([node.module] if node.module else []))
            out |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return out


def _graph(node_of) -> dict[str, set[str]]:
    modules = _modules()
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        source = node_of(name, modules)
        if source is None:
            continue
        for target in map(lambda t: node_of(t, modules), _imported(name, path)):
            if target is not None and target != source:
                edges.setdefault(source, set()).add(target)
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node], _ = "open", stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        state[node], _ = "done", stack.pop()

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def engine_package(name: str, _modules: dict) -> str | None:
    """``fireside.engine.runner.batch`` -> ``runner``; a top-level module (``types``) is its own node."""
    parts = name.split(".")
    return parts[2] if parts[:2] == ["fireside", "engine"] and len(parts) > 2 else None


def app_module(name: str, modules: dict) -> str | None:
    """An app module; ``from ..feedback import show_error`` names ``fireside.app.feedback``."""
    while name.startswith("fireside.app") and name not in modules:
        name = name.rsplit(".", 1)[0]
    return name if name.startswith("fireside.app.") else None


def test_the_walk_sees_the_layering():
    engine, app = _graph(engine_package), _graph(app_module)
    assert {"runtime", "remote", "types"} <= engine["facade"]  # the facade sits over both
    assert "types" in engine["runtime"] and "types" in engine["remote"]
    assert "fireside.app.bridge.serving" in app["fireside.app.windows.server"]


LEAVES = {"types", "errors", "settings", "fmt", "fsutil", "procs", "deps", "faces"}


def test_the_documents_wing_sits_on_the_leaves():
    """Documents and retrieval (``engine/documents/``) read files and keep an index; they reach a model only
    through an ``Embedder`` they are handed, so they import nothing of the engine but its leaves, and the
    facade, server and app can all sit above them."""
    engine = _graph(engine_package)
    assert "errors" in engine["documents"]  # the walk sees the wing
    assert engine["documents"] <= LEAVES


def test_no_cycle_between_engine_packages():
    assert _cycles(_graph(engine_package)) == []


def test_no_cycle_between_app_modules():
    assert _cycles(_graph(app_module)) == []


RUNNER = "fireside.engine.runner"
# what the server's side imports of the runner's wing: its face, and the prompt cache folder's format (the pipe,
# ``protocol.py``, and ggml's device API, ``ggml.py``, are on the ground floor)
SHARED = {RUNNER, f"{RUNNER}.kvcache"}
GROUND = {f"fireside.engine.{leaf}" for leaf in LEAVES | {"protocol", "ggml"}}


def _crossings(modules: dict[str, Path]) -> list[tuple[str, str]]:
    """Imports across the process boundary: into ``runner/`` from outside it other than ``SHARED``, or out of
    it into anything of the engine but the ground floor (``GROUND``)."""
    def in_runner(name: str) -> bool:
        return name == RUNNER or name.startswith(RUNNER + ".")

    found = []
    for name, path in modules.items():
        for target in _imported(name, path):
            if target not in modules or in_runner(name) == in_runner(target):
                continue
            if in_runner(target) and target not in SHARED and name.startswith("fireside."):
                found.append((name, target))
            elif in_runner(name) and target.startswith("fireside.engine.") and target not in GROUND:
                found.append((name, target))
    return sorted(found)


def test_the_runner_process_and_the_server_process_share_only_the_pipe():
    """A runner is started by name (``python -m fireside.engine.runner``), never imported: what runs in
    the runner process lives in ``runner/`` and reaches the rest of the engine only on its ground floor."""
    modules = _modules()
    assert {f"{RUNNER}.process", f"{RUNNER}.batch", "fireside.engine.runtime.runtime"} <= set(modules)
    assert _crossings(modules) == []


def test_the_boundary_check_sees_a_crossing(tmp_path):
    (tmp_path / "out.py").write_text("from ..structured.grammar import checked\nfrom ..protocol import FramedPipe\n")
    (tmp_path / "into.py").write_text("from ..runner import batch\nfrom ..runner import kvcache\n")
    modules = {**_modules(), f"{RUNNER}.out": tmp_path / "out.py", "fireside.engine.runtime.into": tmp_path / "into.py"}
    assert _crossings(modules) == [(f"{RUNNER}.out", "fireside.engine.structured.grammar"),
                                   ("fireside.engine.runtime.into", f"{RUNNER}.batch")]


def engine_module(name: str, modules: dict) -> str | None:
    """An engine module; ``from .x import y`` names module ``x`` (or ``x.y`` when ``y`` is a module)."""
    while name.startswith("fireside.engine") and name not in modules:
        name = name.rsplit(".", 1)[0]
    return name if name.startswith("fireside.engine.") else None


def test_no_cycle_between_engine_modules():
    """Not even inside a wing: ``prompts/templates.py`` and the template worker's pool (``renderer.py``) imported
    each other until the worker's job loop got a home of its own (``prompts/worker.py``). A module's import of
    its own package (``from . import sibling``) is not an edge: the package is loaded before it anyway."""
    edges = {source: {t for t in targets if not source.startswith(t + ".")}
             for source, targets in _graph(engine_module).items()}
    assert "fireside.engine.prompts.renderer" in edges["fireside.engine.prompts.templates"]  # the walk sees it
    assert _cycles(edges) == []


def test_the_walk_finds_a_cycle_when_there_is_one():
    [cycle] = _cycles({"runtime": {"remote", "types"}, "remote": {"types", "runtime"}, "types": set()})
    assert cycle[0] == cycle[-1] and set(cycle) == {"runtime", "remote"}  # the loop #15 removed


WIDGET_FOLDERS = ("fireside.app.windows", "fireside.app.chat")
ENGINE_VALUES = ("fireside.engine.types", "fireside.engine.errors", "fireside.engine.fmt")


def _door_breaches(imports: dict[str, set[str]]) -> dict[str, set[str]]:
    """For each widget module, the engine modules it imports that are not value types."""
    def value(target: str) -> bool:
        return any(target == v or target.startswith(v + ".") for v in ENGINE_VALUES)

    breaches = {}
    for name, targets in imports.items():
        if name.startswith(WIDGET_FOLDERS):
            wrong = {t for t in targets if (t == "fireside.engine" or t.startswith("fireside.engine.")) and not value(t)}
            if wrong:
                breaches[name] = wrong
    return breaches


def test_windows_and_chat_widgets_import_only_the_engines_value_types():
    imports = {name: _imported(name, path) for name, path in _modules().items()}
    widgets = [n for n in imports if n.startswith(WIDGET_FOLDERS)]
    assert "fireside.app.chat.page" in widgets and "fireside.app.windows.models" in widgets  # the walk sees them
    assert "fireside.engine.fmt" in imports["fireside.app.windows.models"]  # ... and their engine imports
    assert _door_breaches(imports) == {}


def test_the_door_rule_finds_a_window_that_reaches_past_the_bridge():
    found = _door_breaches({"fireside.app.windows.cache_settings": {"fireside.engine.fmt", "fireside.engine.runtime",
                                                                    "fireside.engine.runner.kvcache"},
                            "fireside.app.bridge.prompt_cache": {"fireside.engine.runner.kvcache"}})
    assert found == {"fireside.app.windows.cache_settings": {"fireside.engine.runtime", "fireside.engine.runner.kvcache"}}



def _wings() -> list[str]:
    return sorted(name for name, path in _modules().items()
                  if path.name == "__init__.py" and name.count(".") == 2 and name.startswith("fireside.engine."))


def test_every_engine_wing_has_a_face():
    """A wing's ``__init__.py`` says what the wing is for (its docstring) and what it offers (``__all__``), and
    every name it offers is there."""
    import importlib

    wings = _wings()
    assert {"fireside.engine.runtime", "fireside.engine.runner", "fireside.engine.prompts",
            "fireside.engine.structured", "fireside.engine.documents"} <= set(wings)
    for wing in wings:
        face = importlib.import_module(wing)
        assert face.__doc__ and face.__doc__.strip(), wing
        assert face.__all__, wing
        assert [n for n in face.__all__ if not hasattr(face, n)] == [], wing


def test_callers_outside_a_wing_import_only_its_face():
    """From another wing, ``cli/``, ``server/`` or the app, a wing is entered by its face (or the ground floor's
    value modules): an import of an inner module fails here with the offending import."""
    assert import_graph.face_breaches() == []


def test_the_face_rule_sees_an_inner_import(tmp_path):
    (tmp_path / "reach.py").write_text("from ..prompts.templates import ChatTemplate\nfrom ..runner import kvcache\n"
                                       "from ..runtime import Runtime\nfrom ..types import Chunk\n")
    (tmp_path / "sibling.py").write_text("from .templates import ChatTemplate\n")
    known = {**_modules(), "fireside.engine.server.reach": tmp_path / "reach.py",
             "fireside.engine.prompts.sibling": tmp_path / "sibling.py"}
    assert import_graph.face_breaches(known) == ["fireside.engine.server.reach (line 1) imports fireside.engine.prompts.templates [ChatTemplate]: "
                   "import it from fireside.engine.prompts"]
