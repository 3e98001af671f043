"""Finding and fetching models: the Hugging Face hub's search and files (``hub.py``), resumable verified
downloads (``downloads.py``) and the queue that runs them (``manager.py``), and the hub token in the keyring
(``auth.py``).

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

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
__getattr__, __dir__ = lazy(__name__, _WHERE)
