"""The model library: models on disk, their index, the starter model, and imports from other apps.

``Library(settings)`` is the one entry point: ``list()``, ``get(id)``, ``remove(id)``, ``add_file(path)``;
``imports`` finds the models that LM Studio, Ollama, the Hugging Face cache, GPT4All and Jan keep.
"""

from .library import Library, LibraryModel

__all__ = ["Library", "LibraryModel"]
