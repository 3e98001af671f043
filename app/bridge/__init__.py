"""The app's one door to the engine: ``EngineBridge`` and what it owns (``downloading``, ``serving``,
``prompt_cache``, ``devices``), the tools (``tools``), the model loader (``loader``) and the task pool (``tasks``).

Windows and chat widgets import the engine's value types (``fireside.engine.types``, ``errors``,
``fmt``) and nothing else of it (tests/test_import_graph.py holds them to that); the few pure helpers
and constants of the engine they also show are named here, so every other way in is visible in one place.
None of them waits: no disk, no network, no keyring (``starter_path`` reads package metadata once and
keeps the answer; ``main`` asks it first, on a worker).
"""

from fireside.engine.devices import short as short_fingerprint
from fireside.engine.documents import CITATION, cited, source_label
from fireside.engine.library import APPS, STARTER_ID, starter_path
from fireside.engine.models import (
           DEFAULT_PARALLEL,
           VERDICT_WORDS,
           LoadOptions,
           drafting_text,
           engine_build,
           plan_fit,
           with_draft,
)
from fireside.engine.remote import is_remote
from fireside.engine.runtime import attention as _attention
from fireside.engine.settings import DEFAULT_PORT, SHARE_PORT

from .bridge import BATCH_S, EngineBridge, TextBatcher
from .tasks import OnDone, Tasks

planned_attention = _attention.planned

__all__ = ["APPS", "BATCH_S", "CITATION", "DEFAULT_PARALLEL", "DEFAULT_PORT", "SHARE_PORT", "STARTER_ID",
           "VERDICT_WORDS", "EngineBridge", "LoadOptions", "OnDone", "Tasks", "TextBatcher", "cited", "drafting_text",
           "engine_build", "is_remote", "plan_fit", "planned_attention", "short_fingerprint", "source_label", "starter_path", "with_draft"]
