"""The model library: models on disk, their index, the starter model, and imports from other apps.

``Library(settings)`` is the one entry point: ``list()``, ``get(id)``, ``remove(id)``, ``add_file(path)``;
``imports`` finds the models that LM Studio, Ollama, the Hugging Face cache, GPT4All and Jan keep.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "disk_use": "library",
    "Library": "library",
    "LibraryModel": "library",
    "imports": "imports",
    "APPS": "imports",
    "default_locations": "imports",
    "find": "imports",
    "import_found": "imports",
    "STARTER_ID": "starter",
    "starter_path": "starter",
    "resolve_model": "resolve",
    "model_id": "names",
    "quant_of": "names",
    "check_file_name": "paths",
    "check_repo_id": "paths",
    "is_path_like": "paths",
}
__all__ = ["APPS", "Library", "LibraryModel", "STARTER_ID", "check_file_name", "check_repo_id",
           "default_locations", "disk_use", "find", "import_found", "imports", "is_path_like", "model_id",
           "quant_of", "resolve_model", "starter_path"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
