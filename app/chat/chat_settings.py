"""A chat's own settings, kept with it: its system prompt, sampling, tools and knowledge (the panel,
``settings_panel.py``) and its model (the model bar, ``picker.py``).

When a chat opens, ``ChatSettings`` puts its settings on show (a new chat gets the defaults and the model
last used) and has the MCP servers and knowledge collections a chat can turn on listed on a worker
(``mcp.json`` and the collections are read there, never on the GUI thread). What the user changes is saved
with the chat on show at once; a model chosen becomes the one last used.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot

from ..bridge import STARTER_ID, starter_path
from ..context import AppContext
from ..feedback import show_error
from ..store import Conversation
from .picker import ModelBar
from .session import ChatSession
from .settings_panel import DEFAULT_SAMPLING, ChatSettingsPanel


class ChatSettings(QObject):
    """Fills the settings panel and the model bar for the chat on show, and saves what the user changes.

    Signals: none.
    """

    def __init__(self, ctx: AppContext, panel: ChatSettingsPanel, model_bar: ModelBar, session: ChatSession,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.ctx, self.panel, self.model_bar, self.session = ctx, panel, model_bar, session
        panel.changed.connect(self._on_panel_changed)
        model_bar.model_chosen.connect(self._on_model_bar_model_chosen)

    def show(self, conv: Conversation | None = None) -> None:
        """Show the settings of ``conv``, or a new chat's when None."""
        if conv is None:
            self.panel.set_values("", DEFAULT_SAMPLING)
            self.panel.set_tools({})
        else:
            self.panel.set_values(conv.system_prompt, conv.sampling)
            self.panel.set_tools(conv.tools)
        self._list_servers()
        self.list_collections()
        if conv is None:
            last = self.ctx.prefs.get("last_model")
            self.model_bar.set_model(last or (STARTER_ID if starter_path() else None))
        else:
            self.model_bar.set_model(conv.model_id or self.ctx.prefs.get("last_model"))

    def _list_servers(self) -> None:
        """Which MCP servers a chat can turn on: ``mcp.json`` is read on a worker, never here."""
        if self.ctx.tools is not None:
            self.ctx.tasks.run_in_background(self.ctx.tools.server_names, self._on_servers_listed)

    @Slot()
    def list_collections(self) -> None:
        """Which knowledge collections a chat can tick, read on a worker."""
        self.ctx.bridge.knowledge.list(self._on_collections_listed)

    def _on_collections_listed(self, rows, error) -> None:
        if error is not None:
            show_error(error, "listing the knowledge collections")
        else:
            self.panel.set_collections([(r.collection.id, r.collection.name) for r in rows])

    def _on_servers_listed(self, names, error) -> None:
        if error is not None:
            show_error(error, "reading the MCP servers")
        else:
            self.panel.set_servers(names)

    @Slot(str)
    def _on_model_bar_model_chosen(self, model_id: str) -> None:
        self.ctx.prefs.set("last_model", model_id)
        if self.session.conv_id is not None:
            self.ctx.store.update_conversation(self.session.conv_id, model_id=model_id)

    @Slot()
    def _on_panel_changed(self) -> None:
        conv_id = self.session.conv_id
        if conv_id is not None:
            system_prompt, sampling = self.panel.values()
            self.ctx.store.update_conversation(conv_id, system_prompt=system_prompt, sampling=sampling,
                                               tools=self.panel.tools())
