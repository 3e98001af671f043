"""Turning messages into prompts: a model's chat template rendered in a sandbox (``sandbox.py``,
``templates.py``) inside worker processes of their own (``renderer.py`` is the pool on the caller's side,
``worker.py`` the worker's job loop), and images in chats decoded, capped and placed in a prompt
(``images.py``).

Offers: ``ChatTemplate`` and ``TEMPLATE_NAMES``; the image limits and types (``ImageFile``, ``FILE_PART``,
``MAX_IMAGE_BYTES``, ``MAX_PIXELS``) and functions (``probe_image``, ``decode_image``, ``mark_images``,
``place_images``, ``LibraryProjectors``). Names load on first use (Jinja and Pillow only when needed).
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "ChatTemplate": "templates",
    "TEMPLATE_NAMES": "templates",
    "FILE_PART": "images",
    "ImageFile": "images",
    "MAX_IMAGE_BYTES": "images",
    "MAX_PIXELS": "images",
    "probe_image": "images",
    "decode_image": "images",
    "mark_images": "images",
    "place_images": "images",
    "LibraryProjectors": "images",
}
__all__ = ["ChatTemplate", "FILE_PART", "ImageFile", "LibraryProjectors", "MAX_IMAGE_BYTES", "MAX_PIXELS",
           "TEMPLATE_NAMES", "decode_image", "mark_images", "place_images", "probe_image"]


def __getattr__(name: str) -> Any:
    """Load a name's module on first use, so the face costs nothing until a caller needs the wing."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_WHERE[name]}")
    return module if name == _WHERE[name] else getattr(module, name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
