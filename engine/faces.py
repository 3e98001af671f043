"""A wing's face that loads its names on first use: a face (a wing's ``__init__.py``) maps each name it offers
to the inner module that holds it, and ``lazy`` makes the module's ``__getattr__`` and ``__dir__`` from that map,
so importing the face costs nothing until a caller needs a name (Jinja, Pillow, FastAPI, zeroconf and llama.cpp
load only with the names that need them)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy(package: str, where: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__, __dir__ = lazy(__name__, _WHERE)``; a name equal to its module's is the module itself."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(f"{package}.{where[name]}")
        return module if name == where[name] else getattr(module, name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
