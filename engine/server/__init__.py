"""The local API server: OpenAI, Ollama and Anthropic dialects over one engine, safe by default.

``create_app(engine, settings)`` builds the ASGI app (``app.py``) around one ``ServerContext``
(``context.py``: the engine, the library, model names resolved); ``ServerThread`` runs it on a
background thread (``thread.py``, each connection with a header deadline from ``h11guard.py``);
``security.py`` and ``policy.py`` guard every request, and ``validation.py`` holds the strict JSON and
typed fields every body must be. Each dialect module (``openai.py``, ``responses.py``, ``anthropic.py``,
``ollama.py``; Ollama's model management in ``ollama_admin.py``, its typed ``options`` in
``ollama_options.py``) only translates: its body in to the
engine's ``ChatRequest`` or ``CompletionRequest`` with the helpers of ``inbound.py``, and the engine's
chunks out through its encoder with those of ``outbound.py``. ``handler.answer`` runs every chat once
for all of them (resolve, queue, stream or collect through ``streaming.py``, cut, usage), and
``errors.py`` maps every error to a status and the dialect's error shape. No dialect imports another.
OpenAI's retrieval routes (``files.py``, ``vector_stores.py``, and ``file_search.py`` for the Responses
tool) map onto the engine's knowledge collections (``documents/collections.py``).

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "create_app": "app",
    "check_bind": "security",
    "SecurityPolicy": "security",
    "ServerThread": "thread",
    "Share": "shared",
    "Sharing": "shared",
    "ApiError": "errors",
    "keep_alive_s": "ollama",
}
__all__ = ["ApiError", "SecurityPolicy", "ServerThread", "Share", "Sharing", "check_bind", "create_app",
           "keep_alive_s"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
