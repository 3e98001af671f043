"""The session's half that writes down a reply with tools, as its ``ToolRun`` reports it.

A reply with tools is several messages in the tree, one under another (as ``toolturn.py`` describes):
each round's reply from the model, made when its first text arrives, and one ``tool`` message per call,
stored when the call asks for approval or starts and updated when it is done (its result saved before
``tool_changed`` is emitted). The calls a round made join its reply's ``tool_calls`` as they come.

``ToolReplies`` is mixed into ``ChatSession`` (``session.py``) so that the session stays the one writer of
a reply: these are its slots for the run's signals, and they use its store, its signals, the reply
under way (``active``) and its ``_grow``/``_end_message``; ``ToolTurn`` says whether a run is the one
under way. The session sets ``_leaf``, ``_round`` and ``_calls`` up when it is made.
"""

from __future__ import annotations

from PySide6.QtCore import Slot

from ..bridge.tools import ToolRun
from ..feedback import show_error
from ..store import Message


class ToolReplies:
    """``ChatSession``'s slots for the run of a reply with tools, and the messages they write."""

    def _follow(self, run: ToolRun) -> None:
        """Write down what ``run`` does, as its signals arrive, then start it."""
        run.text.connect(self._on_run_text)
        run.round_ended.connect(self._on_run_round_ended)
        run.approval_requested.connect(self._on_run_approval_requested)
        run.call_started.connect(self._on_run_call_started)
        run.step_done.connect(self._on_run_step_done)
        run.problem.connect(self._on_run_problem)
        run.finished.connect(self._on_run_finished)
        run.failed.connect(self._on_run_failed)
        self._leaf, self._round, self._calls = self.active.id, None, {}
        run.start()

    def call_message(self, call_id: str | None) -> int | None:
        """The tool message of call ``call_id`` in the reply with tools under way."""
        return self._calls.get(call_id or "")

    def _round_message(self, model_id: str) -> Message:
        """The model's reply in this round: the first is made by ``_start_reply``; later ones go under
        the last call's result when their first text arrives."""
        if self.active is None:
            conv_id = self.store.message(self._leaf).conversation_id
            self.active = self.store.add_message(conv_id, self._leaf, "assistant", "", "streaming", model_id)
            self._reasoning_t = []
            self._leaf = self.active.id
            self.thread_changed.emit()
        return self.active

    def _tool_message(self, call, state: str, step=None) -> None:
        msg_id = self._calls.get(call.id)
        if msg_id is None:
            self._record_call(call)
            tool = {"call_id": call.id, "function": call.function, "server": call.server, "tool": call.tool,
                    "arguments": call.pretty_arguments(), "problem": call.problem}
            conv_id = self.store.message(self._leaf).conversation_id
            msg = self.store.add_message(conv_id, self._leaf, "tool", "", state, None, tool)
            self._calls[call.id], self._leaf = msg.id, msg.id
            self.thread_changed.emit()
        msg = self.store.message(self._calls[call.id])
        if step is not None:
            msg.content, msg.tool = step.content, {**msg.tool, "outcome": step.outcome}
        msg.state = state
        self.store.update_message(msg.id, content=msg.content, state=state, tool=msg.tool)
        self.tool_changed.emit(msg)

    def _record_call(self, call) -> None:
        """Add ``call`` to the ``tool_calls`` of the model's reply that made it."""
        if self._round is None:
            return
        calls = list(self._round.tool.get("calls") or [])
        calls.append({"id": call.id, "type": "function",
                      "function": {"name": call.function, "arguments": call.raw_arguments}})
        self._round.tool = {**self._round.tool, "calls": calls}
        self.store.update_message(self._round.id, tool=self._round.tool)

    def _end_tool_reply(self, state: str, stats: dict) -> None:
        last = self._leaf
        if self.active is not None:
            last = self._end_message(state, stats).id
        elif stats and self._round is not None and self._round.id == last:
            self.store.update_message(last, stats={**self._round.stats, **stats})
        self.tool_turn.finish()  # its thread has sent its last signal
        self.busy_changed.emit(False)
        self.thread_changed.emit()
        self.reply_ended.emit(last, state)

    @Slot(int, str, str)
    def _on_run_text(self, run_id: int, kind: str, text: str) -> None:
        if self.tool_turn.owns(run_id):
            self._grow(self._round_message(self.tool_turn.run.model_id), kind, text)

    @Slot(int, object)
    def _on_run_round_ended(self, run_id: int, done) -> None:
        if not self.tool_turn.owns(run_id):
            return
        self._round_message(self.tool_turn.run.model_id)
        stats = {"finish_reason": done.finish_reason, **(done.usage.to_dict() if done.usage else {})}
        self._round = self._end_message("stopped" if done.finish_reason == "cancelled" else "complete", stats)

    @Slot(int, object)
    def _on_run_approval_requested(self, run_id: int, call) -> None:
        if self.tool_turn.owns(run_id):
            self._tool_message(call, "pending")

    @Slot(int, object)
    def _on_run_call_started(self, run_id: int, call) -> None:
        if self.tool_turn.owns(run_id):
            self._tool_message(call, "running")

    @Slot(int, object)
    def _on_run_step_done(self, run_id: int, step) -> None:
        if self.tool_turn.owns(run_id):
            self._tool_message(step.call, "stopped" if step.outcome == "cancelled" else "complete", step)

    @Slot(int, str)
    def _on_run_problem(self, run_id: int, text: str) -> None:
        if self.tool_turn.owns(run_id):
            show_error(text)

    @Slot(int, object)
    def _on_run_finished(self, run_id: int, result) -> None:
        if not self.tool_turn.owns(run_id):
            return
        stats = {"tool_steps": len(result.steps)}
        if result.hit_step_limit:
            stats["tool_step_limit"] = self.tool_turn.run.max_steps
        self._end_tool_reply("stopped" if result.finish_reason == "cancelled" else "complete", stats)

    @Slot(int, object)
    def _on_run_failed(self, run_id: int, error) -> None:
        if self.tool_turn.owns(run_id):
            self._end_tool_reply("error", {})
            show_error(error, "the reply failed")
