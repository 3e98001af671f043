"""The local API server: OpenAI, Ollama and Anthropic dialects over one runtime, safe by default.

``create_app(runtime, settings)`` builds the ASGI app (``app.py``); ``ServerThread`` runs it on a
background thread (``thread.py``); ``security.py`` guards every request; one module per dialect
(``openai.py``, ``responses.py``, ``ollama.py``, ``anthropic.py``) translates JSON to the engine's
types and back; ``errors.py`` maps every error to a status and a dialect's error shape.
"""

from .app import create_app
from .security import SecurityPolicy
from .thread import ServerThread

__all__ = ["SecurityPolicy", "ServerThread", "create_app"]
