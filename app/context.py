"""What every page is built from: the settings, preferences, store, engine, the bridge to it and the tools.

One ``AppContext`` is made by ``main`` (or by a test fixture, with its own engine) and handed to the
main window, which hands it to each page; nothing in the app reaches for a global. Pages read the
engine's quick, locked state (``loaded()``, ``is_loaded``) directly; everything that waits (a load, a
reply, the keyring, the disk, the network) goes through ``bridge``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fireside.engine.facade import Engine
from fireside.engine.settings import Settings

from .bridge import EngineBridge
from .bridge.tasks import Tasks
from .prefs import Prefs
from .store import Store


@dataclass
class AppContext:
    settings: Settings
    prefs: Prefs
    store: Store
    engine: Engine  # or, in a test, a stand-in with the same methods
    tasks: Tasks
    bridge: EngineBridge
    extras: dict[str, Any] = field(default_factory=dict)
    tools: Any = None  # fireside.app.bridge.tools.AppTools: the MCP servers chats may use (None: no tools)
    loader: Any = None  # fireside.app.bridge.loader.ModelLoader: the app's loads, whoever asks for them

