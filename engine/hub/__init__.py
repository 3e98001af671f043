"""Finding and fetching models: the Hugging Face hub's search and files (``hub.py``), resumable verified
downloads (``downloads.py``) and the queue that runs them (``manager.py``), and the hub token in the keyring
(``auth.py``).

Offers: ``Hub`` and its ``SORTS``; ``DownloadManager`` and ``Progress``; ``get_token``, ``set_token``,
``delete_token``. Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "Hub": "hub",
    "SORTS": "hub",
    "DownloadManager": "manager",
    "Progress": "downloads",
    "delete_token": "auth",
    "get_token": "auth",
    "set_token": "auth",
}
__all__ = ["DownloadManager", "Hub", "Progress", "SORTS", "delete_token", "get_token", "set_token"]


def __getattr__(name: str) -> Any:
    """Load a name's module on first use, so the face costs nothing until a caller needs the wing."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
    return module if name == _WHERE[name] else getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
