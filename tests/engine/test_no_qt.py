"""The engine never imports Qt: every fireside.engine module imports with PySide6 made unimportable."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
sys.modules["PySide6"] = None  # any `import PySide6...` now raises ImportError
import fireside.engine as engine
names = [m.name for m in pkgutil.walk_packages(engine.__path__, "fireside.engine.")
         if not m.name.endswith("__main__") and not m.name.endswith(".runner")]
for name in names:
    importlib.import_module(name)
import fireside.engine.runner.process  # importable, but it must not start a runner on import
loaded = sorted(m for m in sys.modules if m.startswith("PySide6") and sys.modules[m] is not None)
print(len(names), loaded)
"""


def test_every_engine_module_imports_without_qt():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) >= 15  # the walk really found the engine's modules
    assert loaded.strip() == "[]"


QT_PACKAGES = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "qtpy")


def qt_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of every Qt import anywhere in ``source``: module level, function bodies, branches."""
    import ast

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] in QT_PACKAGES]
    return found


def test_no_engine_source_imports_qt_anywhere_in_it():
    """The subprocess above sees imports that run at import time; this reads every engine file with
    ``ast``, so an ``import PySide6`` inside a function body (run only on some path) is caught too."""
    from pathlib import Path

    engine = Path(__file__).resolve().parents[2] / "engine"
    files = sorted(engine.rglob("*.py"))
    found = [f"{path.relative_to(engine)}:{line} {name}" for path in files
             for line, name in qt_imports(path.read_text(encoding="utf-8"))]
    assert len(files) >= 60  # the walk really read the engine
    assert found == []


def test_the_scan_sees_an_import_in_a_function_body():
    source = "import json\n\ndef late():\n    if True:\n        from PySide6.QtCore import QObject\n        import shiboken6\n"
    assert qt_imports(source) == [(5, "PySide6.QtCore"), (6, "shiboken6")]
