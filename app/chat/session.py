"""One chat's conversation flow, without widgets: send, stream, stop, regenerate, retry, edit, branches.

``ChatSession`` is the state machine the Chat page renders. Sending adds your message to the store, then
starts a reply: an empty assistant message is stored as ``streaming`` and the bridge streams into it;
each batch of text is written to the store *before* ``message_grew`` tells a view to show it, so a crash
never loses text the user saw. Stop sets the reply's cancel event; Regenerate adds a sibling reply;
editing a message adds a sibling question and a fresh reply; flipping a branch shows another sibling's
thread. A model that is not loaded yet is loaded first (``models.ensure_loaded``) and the reply starts
when the page reports it ready. A failed reply, or your last message left unanswered because its model
did not load, can be retried. Reasoning is timed from its first chunk to the first chunk of the answer.
A chat with MCP servers turned on answers through a ``ToolRun`` that its ``ToolTurn`` (``toolturn.py``)
starts instead of the bridge: the run's signals come to the session's slots (``ToolReplies``,
``toolreply.py``) as the bridge's do, with the same states and signals, plus ``tool_changed`` for each
call, and ``decide`` for the user's answer to an approval card. The session is the one writer of a
reply: every message of it, tool calls included, is stored here and nowhere else (the sources a reply
was given too: the bridge reports them, and they are saved with the reply before its first text). Your
message may carry documents (the bridge grounds the reply in them, ``bridge/chatdocs.py``) and images
(names of files the bridge saved when they were attached); every request sends the whole thread as the
model reads it (``request.py``), its images and documents included, so a later turn still sees them.

The session lives on the GUI thread and touches only the store, the preferences and the bridge; the
page hands it the chat's settings and the model on show (``models``: anything with ``current()`` and
``ensure_loaded(model_id)``: the model bar's choice and the app's ``ModelLoader``, ``bridge/loader.py``).
"""

from __future__ import annotations

import time
from typing import Protocol

from PySide6.QtCore import QObject, Signal, Slot

from fireside.engine.types import ChatRequest

from ..bridge.prompt_cache import tag_for
from ..bridge.tools import AppTools
from ..feedback import show_error
from ..store import Message, Store
from .request import request_messages, to_sampling
from .toolreply import ToolReplies
from .toolturn import ToolTurn


class Models(Protocol):
    def current(self) -> str | None: ...
    def ensure_loaded(self, model_id: str) -> bool: ...


class ChatSession(ToolReplies, QObject):
    """The conversation on show and the reply under way.

    Signals:
        thread_changed(): the thread on show changed (a chat opened, a message added, a branch flipped).
        busy_changed(bool): a reply (or the load it waits for) started or ended.
        reply_started(int): reply message id.
        message_grew(object): a streaming ``Message`` whose new text is saved and may be shown.
        message_ended(object): a ``Message`` whose final state and stats are saved.
        prompt_counted(int): the tokens the reply under way's prompt takes (before its stats are known).
        reply_ended(int, str): reply id, its final state (``complete``, ``stopped`` or ``error``).
        editing_changed(object): the ``Message`` being edited, or None when no edit is under way.
        tool_changed(object): a ``tool`` Message (one call) whose state changed: awaiting approval,
            running, or done with its result (saved first).
    """

    thread_changed = Signal()
    busy_changed = Signal(bool)
    reply_started = Signal(int)
    message_grew = Signal(object)
    message_ended = Signal(object)
    prompt_counted = Signal(int)
    reply_ended = Signal(int, str)
    editing_changed = Signal(object)
    tool_changed = Signal(object)

    def __init__(self, store: Store, bridge, prefs, models: Models, tools: AppTools | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.store, self.bridge, self.prefs, self.models = store, bridge, prefs, models
        self.conv_id: int | None = None
        self.active: Message | None = None
        self.pending_parent: Message | None = None
        self.editing: Message | None = None
        self._reasoning_t: list[float] = []
        self._leaf = 0  # a reply with tools: its newest message, under which the next one goes
        self._round: Message | None = None  # ... the model's reply whose calls are being answered
        self._calls: dict[str, int] = {}  # ... call id -> its tool message
        self.tool_turn = ToolTurn(self, tools)
        bridge.load_failed.connect(self._on_bridge_load_failed)
        bridge.reply_text.connect(self._on_bridge_reply_text)
        bridge.reply_finished.connect(self._on_bridge_reply_finished)
        bridge.reply_failed.connect(self._on_bridge_reply_failed)
        bridge.reply_sources.connect(self._on_bridge_reply_sources)
        bridge.reply_prompt.connect(self._on_bridge_reply_prompt)

    def dispose(self) -> None:
        """The window is closing: a reply with tools still running is stopped and no longer written down."""
        self.tool_turn.dispose()

    @property
    def busy(self) -> bool:
        return self.active is not None or self.pending_parent is not None or self.tool_turn.running

    @property
    def replying(self) -> bool:
        """A reply is under way (streaming, or a reply with tools between its rounds)."""
        return self.active is not None or self.tool_turn.running

    # --- the conversation on show ----------------------------------------------------------------
    def new_chat(self) -> None:
        self.conv_id = None
        self.cancel_edit()
        self.thread_changed.emit()

    def open(self, conv_id: int):
        """Make ``conv_id`` the conversation on show; returns it, or None when it no longer exists. The
        page shows its thread once it has set the chat's settings and model (the meter needs both)."""
        try:
            conv = self.store.conversation(conv_id)
        except KeyError:
            return None
        self.conv_id = conv_id
        self.cancel_edit()
        return conv

    def thread(self) -> tuple[list[Message], dict[int, tuple[int, int]]]:
        """The messages on show and, for each, its place among its siblings (index, count)."""
        messages = self.store.thread(self.conv_id) if self.conv_id is not None else []
        branches = {}
        for m in messages:
            siblings = self.store.siblings(m)
            branches[m.id] = (siblings.index(m.id), len(siblings))
        return messages, branches

    def last_stats(self) -> dict:
        if self.conv_id is None:
            return {}
        return next((m.stats for m in reversed(self.store.thread(self.conv_id)) if m.stats), {})

    def unanswered(self) -> int | None:
        """Your last message when it has no reply and nothing is under way (it offers Retry)."""
        if self.busy or self.conv_id is None:
            return None
        thread = self.store.thread(self.conv_id)
        return thread[-1].id if thread and thread[-1].role == "user" else None

    def ensure_conversation(self, text: str, model_id: str, system_prompt: str, sampling: dict,
                            tools: dict | None = None) -> int:
        if not system_prompt.strip():  # a new chat starts from the model's default system prompt, if any
            system_prompt = ((self.prefs.get("model_defaults") or {}).get(model_id) or {}).get("system_prompt", "")
        if self.conv_id is None:
            title = " ".join(text.split())[:48] or "New chat"
            self.conv_id = self.store.create_conversation(title, model_id, system_prompt, sampling).id
            if tools:
                self.store.update_conversation(self.conv_id, tools=tools)
        else:
            self.store.update_conversation(self.conv_id, model_id=model_id)
        self.prefs.set("last_model", model_id)
        return self.conv_id

    # --- what the user does ----------------------------------------------------------------------
    def send(self, text: str, system_prompt: str, sampling: dict, tools: dict | None = None,
             images: list[str] | None = None, documents: list[dict] | None = None) -> bool:
        """Add your message, with ``images`` (names of saved image files) and ``documents`` (the saved
        documents' dicts, see ``store.py``'s _V5), and start its reply; False when there is nothing to send
        or a reply is under way."""
        text, model_id, images = text.strip(), self.models.current(), list(images or [])
        documents = list(documents or [])
        if not (text or images or documents) or self.busy:
            return False
        if not model_id:
            show_error("Choose a model first (the model bar above the chat)")
            return False
        title = text or (documents[0]["file"] if documents else "An image")
        conv_id = self.ensure_conversation(title, model_id, system_prompt, sampling, tools)
        thread = self.store.thread(conv_id)
        parent = self.editing.parent_id if self.editing else (thread[-1].id if thread else None)
        user = self.store.add_message(conv_id, parent, "user", text, images=images, documents=documents)
        self.cancel_edit()
        self._reply_to(user)
        return True

    def stop(self) -> None:
        if self.tool_turn.running:
            self.tool_turn.stop()
        elif self.active is not None:
            self.bridge.stop(self.active.id)
        elif self.pending_parent is not None:
            self.bridge.cancel_load(self.models.current() or "")

    def regenerate(self, reply_id: int) -> None:
        reply = self.store.message(reply_id)
        if self.replying or reply.parent_id is None:
            return
        parent = self.store.message(reply.parent_id)
        self.store.switch_branch(parent.id)
        self.store.update_conversation(parent.conversation_id, leaf_id=parent.id)
        self._reply_to(parent)

    def retry(self, message_id: int) -> None:
        """Send again: a failed reply is regenerated; your unanswered last message gets its reply."""
        msg = self.store.message(message_id)
        if msg.role == "assistant":
            return self.regenerate(message_id)
        if self.busy or not self.models.current():
            return
        thread = self.store.thread(msg.conversation_id)
        if thread and thread[-1].id == msg.id:
            self._reply_to(msg)

    def start_edit(self, message_id: int) -> Message | None:
        if self.replying:
            return None
        self.editing = self.store.message(message_id)
        self.editing_changed.emit(self.editing)
        return self.editing

    def cancel_edit(self) -> None:
        was, self.editing = self.editing, None
        if was is not None:
            self.editing_changed.emit(None)

    def flip_branch(self, message_id: int, step: int) -> None:
        if self.replying:
            return
        siblings = self.store.siblings(self.store.message(message_id))
        index = siblings.index(message_id) + step
        if 0 <= index < len(siblings):
            self.store.switch_branch(siblings[index])
            self.thread_changed.emit()

    def decide(self, message_id: int, decision: str) -> None:
        """Answer the tool call of message ``message_id``: ``run``, ``deny``, ``chat`` or ``always``."""
        self.tool_turn.decide(message_id, decision)

    def model_ready(self, model_id: str) -> None:
        """The loader finished loading ``model_id``: a reply that waited for it starts now."""
        parent, self.pending_parent = self.pending_parent, None
        if parent is not None and model_id == self.models.current():
            self._start_reply(parent, model_id)
        elif parent is not None:
            self.busy_changed.emit(False)

    # --- replies ---------------------------------------------------------------------------------
    def _reply_to(self, parent: Message) -> None:
        """Answer ``parent`` (which must be the current leaf), loading the model first if needed."""
        model_id = self.models.current()
        self.thread_changed.emit()
        if not self.models.ensure_loaded(model_id):
            self.pending_parent = parent
            self.busy_changed.emit(True)
            return
        self._start_reply(parent, model_id)

    def _start_reply(self, parent: Message, model_id: str) -> None:
        conv = self.store.conversation(parent.conversation_id)
        messages = request_messages(self.store, conv.id)
        self.active = self.store.add_message(conv.id, parent.id, "assistant", "", "streaming", model_id)
        self._reasoning_t = []
        self.thread_changed.emit()
        self.busy_changed.emit(True)
        if self.tool_turn.servers(conv):
            self._follow(self.tool_turn.start(conv, self.active, messages, to_sampling(conv.sampling)))
        else:
            self.bridge.chat(self.active.id, model_id, ChatRequest(messages=messages, sampling=to_sampling(conv.sampling),
                                                                   cache_tag=tag_for(conv.id)), conv.id,
                             collections=list(conv.tools.get("collections") or []))
        self.reply_started.emit(self.active.id)

    def _grow(self, msg: Message, kind: str, text: str) -> None:
        if kind == "reasoning":
            self._reasoning_t[:1] = self._reasoning_t[:1] or [time.monotonic()]
            msg.reasoning += text
        else:
            if msg.reasoning and len(self._reasoning_t) == 1:
                self._reasoning_t.append(time.monotonic())
                msg.reasoning_s = self._reasoning_t[1] - self._reasoning_t[0]
            msg.content += text
        self.store.update_message(msg.id, content=msg.content, reasoning=msg.reasoning, reasoning_s=msg.reasoning_s)
        self.message_grew.emit(msg)

    def _end_message(self, state: str, stats: dict) -> Message:
        msg, self.active = self.active, None
        self.store.update_message(msg.id, content=msg.content, state=state, stats=stats)
        msg.state, msg.stats = state, stats
        self.message_ended.emit(msg)
        return msg

    def _end_reply(self, state: str, stats: dict) -> None:
        msg = self._end_message(state, stats)
        self.busy_changed.emit(False)
        self.reply_ended.emit(msg.id, state)

    # --- engine events ---------------------------------------------------------------------------
    @Slot(str, object)
    def _on_bridge_load_failed(self, _model_id: str, _error) -> None:
        if self.pending_parent is not None:  # the load's own error is shown by the loader
            self.pending_parent = None
            self.busy_changed.emit(False)  # the message that waited for the load now offers Retry

    @Slot(int, str, str)
    def _on_bridge_reply_text(self, reply_id: int, kind: str, text: str) -> None:
        if self.active is not None and reply_id == self.active.id:
            self._grow(self.active, kind, text)

    @Slot(int, object)
    def _on_bridge_reply_sources(self, reply_id: int, sources) -> None:
        if self.active is not None and reply_id == self.active.id:
            self.active.sources = sources
            self.store.update_message(self.active.id, sources=sources)
            self.message_grew.emit(self.active)

    @Slot(int, int)
    def _on_bridge_reply_prompt(self, reply_id: int, tokens: int) -> None:
        if self.active is not None and reply_id == self.active.id:
            self.prompt_counted.emit(tokens)

    @Slot(int, object)
    def _on_bridge_reply_finished(self, reply_id: int, done) -> None:
        if self.active is None or reply_id != self.active.id:
            return
        stats = {"finish_reason": done.finish_reason, **(done.usage.to_dict() if done.usage else {})}
        self._end_reply("stopped" if done.finish_reason == "cancelled" else "complete", stats)

    @Slot(int, object)
    def _on_bridge_reply_failed(self, reply_id: int, error) -> None:
        if self.active is None or reply_id != self.active.id:
            return
        self._end_reply("error", {})
        show_error(error, "the reply failed")
