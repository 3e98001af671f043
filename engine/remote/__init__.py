"""Remote engines: OpenAI-compatible servers elsewhere (vLLM, SGLang, llama-server, Ollama, LM Studio,
another Fireside) whose models Fireside lists and serves beside its own.

``registry.py`` keeps the list the user added (name, base URL, key in the OS keyring);
``client.py`` talks to one remote and turns its streams into engine chunks; ``engine.py`` holds
``RemoteEngine``, which the engine facade (``engine/facade.py``) hands every ``remote/NAME/MODEL`` id
to, so the chat window, the CLI and every API dialect of the server reach remote models through the
same calls as local ones.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "is_remote": "engine",
    "remote_id": "engine",
    "RemoteEngine": "engine",
    "RemoteModel": "engine",
    "RemoteStatus": "engine",
    "split_id": "engine",
    "KeyringStore": "registry",
    "RemoteEndpoint": "registry",
    "RemoteError": "registry",
    "RemoteRegistry": "registry",
}
__all__ = ["KeyringStore", "RemoteEndpoint", "RemoteEngine", "RemoteError", "RemoteModel",
           "RemoteRegistry", "RemoteStatus", "is_remote", "remote_id", "split_id"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
