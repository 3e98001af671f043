"""Knowing a model before loading it: GGUF inspection (``inspection.py`` over the header reader,
``header.py``), this machine's hardware (``hardware.py``), the fit planner (``planner.py``) and vision
projectors (``projector.py``); ``bert.py`` writes the built-in embedder's GGUF.

Offers: ``inspect_file`` and ``ModelInfo``; ``Hardware``; ``plan_fit``, ``FitPlan``, ``LoadOptions``,
``with_draft``, ``with_projector``; ``read_projector``. Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "ModelInfo": "inspection",
    "inspect_file": "inspection",
    "Hardware": "hardware",
    "FitPlan": "planner",
    "LoadOptions": "planner",
    "plan_fit": "planner",
    "with_draft": "planner",
    "with_projector": "planner",
    "read_projector": "projector",
}
__all__ = ["FitPlan", "Hardware", "LoadOptions", "ModelInfo", "inspect_file", "plan_fit", "read_projector",
           "with_draft", "with_projector"]


def __getattr__(name: str) -> Any:
    """Load a name's module on first use, so the face costs nothing until a caller needs the wing."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
    return module if name == _WHERE[name] else getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
