"""The app's one door to the engine: ``EngineBridge`` and the controllers it owns, and the task pool."""

from .bridge import BATCH_S, EngineBridge
from .tasks import OnDone, Tasks

__all__ = ["BATCH_S", "EngineBridge", "OnDone", "Tasks"]
