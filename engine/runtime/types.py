"""The engine's value types under their old address: they live in ``fireside.engine.types`` (a leaf that
the runtime and the remote engines both import). Kept because modules other sessions are rewriting
(the server's dialect modules, the chat window) still import them from here; new code imports
``fireside.engine.types``.
"""

from ..types import (
    ChatRequest,
    Chunk,
    CompletionRequest,
    LoadedModel,
    LoadProgress,
    Sampling,
    TokenLogprob,
    ToolCall,
    Usage,
)

__all__ = ["ChatRequest", "Chunk", "CompletionRequest", "LoadProgress", "LoadedModel", "Sampling", "TokenLogprob",
           "ToolCall", "Usage"]
