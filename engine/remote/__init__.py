"""Remote engines: OpenAI-compatible servers elsewhere (vLLM, SGLang, llama-server, Ollama, LM Studio,
another Fireside) whose models Fireside lists and serves beside its own.

``registry.py`` keeps the list the user added (name, base URL, key in the OS keyring);
``client.py`` talks to one remote and turns its streams into engine chunks; ``engine.py`` holds
``RemoteEngine``, which the engine facade (``engine/facade.py``) hands every ``remote/NAME/MODEL`` id
to, so the chat window, the CLI and every API dialect of the server reach remote models through the
same calls as local ones.
"""

from .engine import RemoteEngine, RemoteModel, is_remote, remote_id, split_id
from .registry import KeyringStore, RemoteEndpoint, RemoteError, RemoteRegistry

__all__ = ["KeyringStore", "RemoteEndpoint", "RemoteEngine", "RemoteError", "RemoteModel", "RemoteRegistry", "is_remote",
           "remote_id", "split_id"]
