"""The tool half of a chat session: starting a reply with MCP tools and steering it, writing nothing.

A reply with tools is several messages in the conversation tree, one after another: the model's reply
that made calls (its ``tool`` field lists them, as OpenAI ``tool_calls``), one ``tool`` message per
call (server, tool, pretty-printed arguments, outcome; its content is exactly what went back to the
model), then the model's next reply, and so on up to the chat's step limit. ``ToolTurn`` starts the
``ToolRun`` doing the work (``bridge/tools.py``) and keeps what only tools need: which calls may run
without asking, and the user's answer to each card. The run's signals go straight to the session's
slots, as the bridge's do: ``ChatSession`` is the one writer of a reply, tool messages included.

"Always allow in this chat" lasts while the app runs; "Always allow this tool" is kept in the
preferences (``tools_always_allowed``: [server, tool] pairs) for every chat.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from fireside.engine.types import Sampling

from ..bridge.tools import AppTools, ToolRun
from ..store import Conversation, Message

DEFAULT_MAX_STEPS = 8


class ToolTurn(QObject):
    """Runs the session's replies that use tools; one at a time, like the session's replies.

    ``tool_choice`` is the first round's choice (``auto`` unless a test forces a call to be
    deterministic).

    Signals: none; its run's go to the session's slots (``ChatSession._follow``, ``toolreply.py``).
    """

    def __init__(self, session, tools: AppTools | None):
        super().__init__(session)
        self.session, self.tools = session, tools
        self.tool_choice: str | dict = "auto"
        self.run: ToolRun | None = None
        self._chat_allowed: dict[int, set[tuple[str, str]]] = {}

    @property
    def running(self) -> bool:
        return self.run is not None

    def servers(self, conv: Conversation) -> list[str]:
        """The servers whose tools this chat has on (none when the app has no tools)."""
        return list(conv.tools.get("servers") or []) if self.tools is not None else []

    def start(self, conv: Conversation, first: Message, messages: list[dict[str, Any]], sampling: Sampling) -> ToolRun:
        """Make the run for the reply whose first message is ``first``; the session connects its signals
        to its own slots, then starts it."""
        self.run = ToolRun(self.tools, first.id, first.model_id or "", messages, sampling,
                           servers=self.servers(conv), max_steps=int(conv.tools.get("max_steps") or DEFAULT_MAX_STEPS),
                           allowed=self.allowed(conv.id), tool_choice=self.tool_choice,
                           prepare=self._preparer(conv.id, first.model_id or "", sampling,
                                                  list(conv.tools.get("collections") or [])), parent=self)
        return self.run

    def _preparer(self, chat_id: int, model_id: str, sampling: Sampling, collections: list[str]):
        """What the run does to the chat's messages on its thread before the first round: its documents
        and ticked knowledge collections grounded (the passages go in, as in a reply without tools; their
        sources are not listed) and its saved images decoded."""
        bridge = self.session.bridge

        def prepare(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
            if collections or bridge.documents.wanted(messages):
                messages = bridge.documents.ground(chat_id, model_id, messages, sampling.max_tokens,
                                                   collections=collections)[0]
            return bridge.images.resolve(messages)
        return prepare

    def owns(self, run_id: int) -> bool:
        """Whether ``run_id`` is the run under way (a disposed or finished run's late signals are not)."""
        return self.run is not None and run_id == self.run.run_id

    def finish(self) -> None:
        """The run sent its last signal."""
        self.run.deleteLater()
        self.run = None

    def stop(self) -> None:
        if self.run is not None:
            self.run.stop()

    def dispose(self) -> None:
        """The window is closing: stop the reply, and ignore whatever its thread still sends."""
        self.stop()
        self.run = None

    def allowed(self, conv_id: int) -> set[tuple[str, str]]:
        kept = {(str(p[0]), str(p[1])) for p in self.session.prefs.get("tools_always_allowed") or [] if len(p) == 2}
        return kept | self._chat_allowed.get(conv_id, set())

    def decide(self, message_id: int, decision: str) -> None:
        """The user answered the card of tool message ``message_id``: run, deny, chat or always."""
        msg = self.session.store.message(message_id)
        if self.run is None or msg.state != "pending" or self.session.call_message(msg.tool.get("call_id")) != msg.id:
            return
        key = (msg.tool.get("server", ""), msg.tool.get("tool", ""))
        if decision == "chat":
            self._chat_allowed.setdefault(msg.conversation_id, set()).add(key)
        elif decision == "always":
            kept = [list(p) for p in self.session.prefs.get("tools_always_allowed") or []]
            self.session.prefs.set("tools_always_allowed", kept + [list(key)] if list(key) not in kept else kept)
        self.run.decide(msg.tool["call_id"], decision)
