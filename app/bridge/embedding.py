"""The model that embeds documents, as the app uses it: read and chosen on the task pool (the choice is
the engine's, ``engine/documents/embedding.py``, so ``fireside serve`` agrees), and followed at once by
the app's knowledge collections (the vector stores its API server serves) and by whoever else registers
(the chats' documents). Owned by the bridge (``bridge.embedder``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from fireside.engine.settings import Settings

log = logging.getLogger(__name__)


class EmbedderController:
    """The documents' embedder: ``read`` and ``choose`` run on the task pool and answer through ``on_done``;
    ``collections()`` (on a worker) is the app's one ``Collections``, embedded by the choice."""

    def __init__(self, engine, settings: Settings | None, tasks: Any):
        self.engine, self.settings, self.tasks = engine, settings, tasks
        self.followers: list[Callable[[str | None], None]] = []  # told the new model id, on a worker
        self._collections = None
        self._lock = threading.Lock()

    def chosen(self) -> str | None:
        """The model id chosen (reads the config folder: call it on a worker)."""
        from fireside.engine.documents import chosen_embedder

        return chosen_embedder(self.settings) if self.settings else None

    def read(self, on_done: Callable) -> None:
        """``on_done((chosen, models))``: the chosen id, and ``(id, embeds_only)`` for each library model."""
        def read():
            models = [(m.id, m.info.embeds_only) for m in self.engine.library().list()]
            return self.chosen(), models
        self.tasks.run_in_background(read, on_done)

    def choose(self, model_id: str | None, on_done: Callable | None = None) -> None:
        """Keep ``model_id`` (None: keywords alone); the collections re-embed in the background."""
        self.tasks.run_in_background(lambda: self._choose(model_id), on_done)

    def _choose(self, model_id: str | None) -> str | None:
        from fireside.engine.documents import choose_embedder, embedder_for

        previous = self.chosen()
        choose_embedder(self.settings, model_id)
        with self._lock:
            collections = self._collections
        if collections is not None:
            collections.use_embedder(embedder_for(self.engine, model_id))
        for follow in list(self.followers):
            try:
                follow(model_id)
            except Exception:  # noqa: BLE001 - one follower's bug must not keep the choice from the rest
                log.exception("applying the documents' embedder %s failed", model_id)
        if previous and previous != model_id:  # its copy loaded to embed would stay until quit otherwise
            self.engine.unload(previous, only_embedding=True)
        return model_id

    def progress(self, on_done: Callable) -> None:
        """``on_done(Embedding | None)``: the collections' background embedding under way, if any."""
        def read():
            with self._lock:
                collections = self._collections
            return collections.embedding() if collections is not None else None
        self.tasks.run_in_background(read, on_done)

    def collections(self):
        """The app's knowledge collections (uploads and vector stores), made on first use; on a worker."""
        from fireside.engine.documents import Collections, embedder_for

        with self._lock:
            if self._collections is None:
                self._collections = Collections(self.settings.knowledge_dir,
                                                embedder_for(self.engine, self.chosen()))
            return self._collections

    def close(self) -> None:
        with self._lock:
            collections, self._collections = self._collections, None
        if collections is not None:
            collections.close()
