"""Stand-ins for boundaries a test cannot or should not reach, each speaking the real interface.

``FakePuller`` replaces the hub behind the server's ``/api/pull`` (progress in three steps, then a real
tiny GGUF in the library); ``FakeEngine`` streams three words as the engine's own ``Chunk`` values and
records unloads and deletes, for bridge tests that are about threads and order, not models.
"""

from __future__ import annotations

import threading

from fireside.engine.types import Chunk, Usage


class FakePuller:
    """Stands in for the hub: reports progress in three steps, then adds a tiny model to the library."""

    def __init__(self, settings, library):
        self.settings, self.library, self.calls = settings, library, []

    def __call__(self, name, on_progress=None, cancel=None):
        from fireside.engine.hub.downloads import Progress
        from tests.helpers.gguf_builder import build_gguf

        self.calls.append(name)
        for done in (0, 512, 1024):
            on_progress(Progress("tiny.gguf", done, 1024, 1e6, 0.0, "downloading"))
        path = build_gguf(self.settings.models_dir / "fake" / "pulled" / "tiny-Q8_0.gguf", name="Tiny")
        return self.library.by_path(path)


class FakeEngine:
    """An engine whose every model is loaded and answers "one two three"; records the threads it ran on,
    and the order of unloads and library removals (``calls``: (what, model id, thread))."""

    def __init__(self):
        self.worker_threads: list[threading.Thread] = []
        self.calls: list[tuple[str, str, threading.Thread]] = []

    def unload(self, model_id):
        self.calls.append(("unload", model_id, threading.current_thread()))
        return True

    def library(self):
        return self

    def remove(self, model_id):
        self.calls.append(("remove", model_id, threading.current_thread()))
        return model_id

    def is_loaded(self, _model_id):
        return True

    def chat(self, _model_id, _request, cancel=None):
        self.worker_threads.append(threading.current_thread())
        for word in ["one ", "two ", "three"]:
            yield Chunk("text", word)
        yield Chunk("done", finish_reason="stop", usage=Usage(completion_tokens=3))
