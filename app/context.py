"""What every page is built from: the settings, preferences, store, runtime, the bridge to it and the tools.

One ``AppContext`` is made by ``main`` (or by a test fixture, with its own runtime) and handed to the
main window, which hands it to each page; nothing in the app reaches for a global.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fireside.engine.library import Library
from fireside.engine.settings import Settings

from .bridge import EngineBridge, Tasks
from .prefs import Prefs
from .store import Store


@dataclass
class AppContext:
    settings: Settings
    prefs: Prefs
    store: Store
    runtime: Any  # fireside.engine.runtime.Runtime, or a stand-in with the same methods
    tasks: Tasks
    bridge: EngineBridge
    extras: dict[str, Any] = field(default_factory=dict)
    tools: Any = None  # fireside.app.tools.AppTools: the MCP servers chats may use (None: no tools)

    def library(self) -> Library:
        """A fresh library view (cheap: the index caches inspections). Call it off the GUI thread."""
        return Library(self.settings)
