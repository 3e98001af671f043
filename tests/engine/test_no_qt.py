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
import fireside.engine.runtime.runner  # importable, but it must not start a runner on import
loaded = sorted(m for m in sys.modules if m.startswith("PySide6") and sys.modules[m] is not None)
print(len(names), loaded)
"""


def test_every_engine_module_imports_without_qt():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) >= 15  # the walk really found the engine's modules
    assert loaded.strip() == "[]"
