"""The tool half of a chat session: one reply with MCP tools, mirrored into the store as it happens.

A reply with tools is several messages in the conversation tree, one after another: the model's reply
that made calls (its ``tool`` field lists them, as OpenAI ``tool_calls``), one ``tool`` message per
call (server, tool, pretty-printed arguments, outcome; its content is exactly what went back to the
model), then the model's next reply, and so on up to the chat's step limit. ``ToolTurn`` listens to
the ``ToolRun`` doing the work (``tools.py``) and writes each of those messages before the session
says it changed, so a crash keeps every call and result the user saw. A call is first ``pending``
(the card asks for approval), then ``running``, then ``complete`` (or ``stopped`` by Stop).

"Always allow in this chat" lasts while the app runs; "Always allow this tool" is kept in the
preferences (``tools_always_allowed``: [server, tool] pairs) for every chat.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Slot

from fireside.engine.mcp.loop import PendingCall, ToolStep
from fireside.engine.types import Sampling

from ..bridge.tools import AppTools, ToolRun
from ..feedback import show_error
from ..store import Conversation, Message

DEFAULT_MAX_STEPS = 8
NOT_RUN = "The call was not run (Fireside stopped before it answered)."


def as_chat_message(m: Message) -> dict[str, Any] | None:
    """A stored message as the model reads it, or None for one it should not see (a failed reply)."""
    if m.state == "error":
        return None
    if m.role == "tool":
        return {"role": "tool", "tool_call_id": m.tool.get("call_id", ""), "name": m.tool.get("function", ""),
                "content": m.content or NOT_RUN}
    if m.tool.get("calls"):
        return {"role": "assistant", "content": m.content, "tool_calls": m.tool["calls"]}
    return {"role": m.role, "content": m.content} if m.content else None


class ToolTurn(QObject):
    """Runs the session's replies that use tools; one at a time, like the session's replies.

    ``tool_choice`` is the first round's choice (``auto`` unless a test forces a call to be
    deterministic).

    Signals: none of its own; it speaks through the session's (``thread_changed``, ``message_grew``,
    ``message_ended``, ``tool_changed``, ``busy_changed``, ``reply_ended``).
    """

    def __init__(self, session, tools: AppTools | None):
        super().__init__(session)
        self.session, self.tools = session, tools
        self.tool_choice: str | dict = "auto"
        self.run: ToolRun | None = None
        self._conv_id = 0
        self._leaf = 0  # the newest message of the reply: the next one goes under it
        self._round: Message | None = None  # the model's reply whose calls are being answered
        self._calls: dict[str, int] = {}  # call id -> its tool message
        self._chat_allowed: dict[int, set[tuple[str, str]]] = {}

    @property
    def running(self) -> bool:
        return self.run is not None

    def servers(self, conv: Conversation) -> list[str]:
        """The servers whose tools this chat has on (none when the app has no tools)."""
        return list(conv.tools.get("servers") or []) if self.tools is not None else []

    def start(self, conv: Conversation, first: Message, messages: list[dict[str, Any]], sampling: Sampling) -> None:
        run = ToolRun(self.tools, first.id, first.model_id or "", messages, sampling, servers=self.servers(conv),
                      max_steps=int(conv.tools.get("max_steps") or DEFAULT_MAX_STEPS),
                      allowed=self.allowed(conv.id), tool_choice=self.tool_choice, parent=self)
        run.text.connect(self._on_run_text)
        run.round_ended.connect(self._on_run_round_ended)
        run.approval_requested.connect(self._on_run_approval_requested)
        run.call_started.connect(self._on_run_call_started)
        run.step_done.connect(self._on_run_step_done)
        run.problem.connect(self._on_run_problem)
        run.finished.connect(self._on_run_finished)
        run.failed.connect(self._on_run_failed)
        self.run, self._conv_id, self._leaf, self._round, self._calls = run, conv.id, first.id, None, {}
        run.start()

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
        if self.run is None or msg.state != "pending" or self._calls.get(msg.tool.get("call_id")) != msg.id:
            return
        key = (msg.tool.get("server", ""), msg.tool.get("tool", ""))
        if decision == "chat":
            self._chat_allowed.setdefault(msg.conversation_id, set()).add(key)
        elif decision == "always":
            kept = [list(p) for p in self.session.prefs.get("tools_always_allowed") or []]
            self.session.prefs.set("tools_always_allowed", kept + [list(key)] if list(key) not in kept else kept)
        self.run.decide(msg.tool["call_id"], decision)

    # --- writing the reply down ------------------------------------------------------------------
    def _mine(self, run_id: int) -> bool:
        return self.run is not None and run_id == self.run.run_id

    def _round_message(self) -> Message:
        """The model's reply in this round: the first is made by the session; later ones go under the
        last call's result when their first text arrives."""
        s = self.session
        if s.active is None:
            s.active = s.store.add_message(self._conv_id, self._leaf, "assistant", "", "streaming", self.run.model_id)
            s._reasoning_t = []
            self._leaf = s.active.id
            s.thread_changed.emit()
        return s.active

    def _tool_message(self, call: PendingCall, state: str, step: ToolStep | None = None) -> None:
        store = self.session.store
        msg_id = self._calls.get(call.id)
        if msg_id is None:
            self._record_call(call)
            tool = {"call_id": call.id, "function": call.function, "server": call.server, "tool": call.tool,
                    "arguments": call.pretty_arguments(), "problem": call.problem}
            msg = store.add_message(self._conv_id, self._leaf, "tool", "", state, None, tool)
            self._calls[call.id], self._leaf = msg.id, msg.id
            self.session.thread_changed.emit()
        msg = store.message(self._calls[call.id])
        if step is not None:
            msg.content, msg.tool = step.content, {**msg.tool, "outcome": step.outcome}
        msg.state = state
        store.update_message(msg.id, content=msg.content, state=state, tool=msg.tool)
        self.session.tool_changed.emit(msg)

    def _record_call(self, call: PendingCall) -> None:
        """Add ``call`` to the ``tool_calls`` of the model's reply that made it."""
        if self._round is None:
            return
        calls = list(self._round.tool.get("calls") or [])
        calls.append({"id": call.id, "type": "function",
                      "function": {"name": call.function, "arguments": call.raw_arguments}})
        self._round.tool = {**self._round.tool, "calls": calls}
        self.session.store.update_message(self._round.id, tool=self._round.tool)

    def _end(self, state: str, stats: dict) -> None:
        s = self.session
        last = self._leaf
        if s.active is not None:
            last = s._end_message(state, stats).id
        elif stats and self._round is not None and self._round.id == last:
            s.store.update_message(last, stats={**self._round.stats, **stats})
        self.run.deleteLater()  # its thread has sent its last signal
        self.run = None
        s.busy_changed.emit(False)
        s.thread_changed.emit()
        s.reply_ended.emit(last, state)

    # --- what the run says -----------------------------------------------------------------------
    @Slot(int, str, str)
    def _on_run_text(self, run_id: int, kind: str, text: str) -> None:
        if self._mine(run_id):
            self.session._grow(self._round_message(), kind, text)

    @Slot(int, object)
    def _on_run_round_ended(self, run_id: int, done) -> None:
        if not self._mine(run_id):
            return
        self._round_message()
        stats = {"finish_reason": done.finish_reason, **(done.usage.to_dict() if done.usage else {})}
        self._round = self.session._end_message("stopped" if done.finish_reason == "cancelled" else "complete", stats)

    @Slot(int, object)
    def _on_run_approval_requested(self, run_id: int, call: PendingCall) -> None:
        if self._mine(run_id):
            self._tool_message(call, "pending")

    @Slot(int, object)
    def _on_run_call_started(self, run_id: int, call: PendingCall) -> None:
        if self._mine(run_id):
            self._tool_message(call, "running")

    @Slot(int, object)
    def _on_run_step_done(self, run_id: int, step: ToolStep) -> None:
        if self._mine(run_id):
            self._tool_message(step.call, "stopped" if step.outcome == "cancelled" else "complete", step)

    @Slot(int, str)
    def _on_run_problem(self, run_id: int, text: str) -> None:
        if self._mine(run_id):
            show_error(text)

    @Slot(int, object)
    def _on_run_finished(self, run_id: int, result) -> None:
        if not self._mine(run_id):
            return
        stats = {"tool_steps": len(result.steps)}
        if result.hit_step_limit:
            stats["tool_step_limit"] = self.run.max_steps
        self._end("stopped" if result.finish_reason == "cancelled" else "complete", stats)

    @Slot(int, object)
    def _on_run_failed(self, run_id: int, error) -> None:
        if self._mine(run_id):
            self._end("error", {})
            show_error(error, "the reply failed")
