"""Turning messages into prompts: a model's chat template rendered in a sandbox (``sandbox.py``,
``templates.py``) inside worker processes of their own (``renderer.py`` is the pool on the caller's side,
``worker.py`` the worker's job loop), and images in chats decoded, capped and placed in a prompt
(``images.py``).

Offers: ``ChatTemplate`` and ``TEMPLATE_NAMES``; the image limits and types (``ImageFile``, ``FILE_PART``,
``MAX_IMAGE_BYTES``, ``MAX_PIXELS``) and functions (``probe_image``, ``decode_image``, ``mark_images``,
``place_images``, ``LibraryProjectors``). Names load on first use (Jinja and Pillow only when needed).
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "ChatTemplate": "templates",
    "TEMPLATE_NAMES": "templates",
    "decode_image": "images",
    "FILE_PART": "images",
    "ImageFile": "images",
    "LibraryProjectors": "images",
    "mark_images": "images",
    "MAX_IMAGE_BYTES": "images",
    "MAX_PIXELS": "images",
    "place_images": "images",
    "probe_image": "images",
}
__all__ = ["ChatTemplate", "FILE_PART", "ImageFile", "LibraryProjectors", "MAX_IMAGE_BYTES", "MAX_PIXELS",
           "TEMPLATE_NAMES", "decode_image", "mark_images", "place_images", "probe_image"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
