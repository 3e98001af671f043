"""Tools in the chat window: the app's MCP hub, and one reply with tools run off the GUI thread.

``AppTools`` owns the hub that reaches every MCP server in ``mcp.json`` (made on first use, closed at
shutdown, which stops the servers and any reply still running). ``ToolRun`` is one reply with tools:
it runs the engine's ``ToolLoop`` on a thread of its own and turns what happens into signals for the
chat session: streamed text (batched by the bridge's ``TextBatcher``), the end of each round of generation,
each call that needs approval, each call that starts, each call's result, and the end of the reply.

Approval never blocks the GUI thread, nor a pool worker the GUI relies on: the loop's own thread waits
on a ``threading.Event`` made for that one call, and the GUI's slot sets it through ``decide``. Stop
sets the run's cancel event and wakes every waiting call, so a card left unanswered never holds a
thread. Every signal is emitted from the run's thread and connected to bound slots of the session, so
Qt queues them onto the GUI thread in the order they were sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from fireside.engine.mcp import McpConfig, McpHub, PendingCall, ToolLoop, ToolStep
from fireside.engine.types import Chunk, Sampling

from .bridge import TextBatcher

log = logging.getLogger(__name__)


class AppTools:
    """The MCP side of the app: which servers exist, the one hub that reaches them, the runs under way."""

    def __init__(self, settings, engine):
        self.settings, self.engine = settings, engine
        self._hub: McpHub | None = None
        self._runs: set[ToolRun] = set()
        self._lock = threading.Lock()
        self._closed = False

    def server_names(self) -> list[str]:
        """The enabled servers in ``mcp.json``. Reads the file: call it off the GUI thread."""
        return [s.name for s in McpConfig(self.settings).list() if not s.disabled]

    def hub(self) -> McpHub:
        """The shared hub, made on first use (from a run's thread, never the GUI's)."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the app is shutting down")
            if self._hub is None:
                self._hub = McpHub(self.settings)
            return self._hub

    def track(self, run: ToolRun, running: bool) -> None:
        with self._lock:
            (self._runs.add if running else self._runs.discard)(run)

    def close(self) -> None:
        """Stop every run (waiting briefly for each) and every server. Idempotent."""
        with self._lock:
            self._closed = True
            runs, self._runs = list(self._runs), set()
            hub, self._hub = self._hub, None
        for run in runs:
            run.stop()
        for run in runs:
            run.join(10)
        if hub is not None:
            hub.close()


class ToolRun(QObject):
    """One reply with tools, on its own thread. ``run_id`` is the id of the reply's first message.

    Signals:
        text(int, str, str): run id, chunk kind (``text`` or ``reasoning``), batched text.
        round_ended(int, object): run id, the ``done`` Chunk of one round of generation.
        approval_requested(int, object): run id, the ``PendingCall`` waiting for the user.
        call_started(int, object): run id, the ``PendingCall`` now running on its server.
        step_done(int, object): run id, the ``ToolStep`` (what went back to the model).
        problem(int, str): run id, a server that could not list its tools (the others carry on).
        finished(int, object): run id, the ``LoopResult``.
        failed(int, object): run id, the exception that ended the reply.
    """

    text = Signal(int, str, str)
    round_ended = Signal(int, object)
    approval_requested = Signal(int, object)
    call_started = Signal(int, object)
    step_done = Signal(int, object)
    problem = Signal(int, str)
    finished = Signal(int, object)
    failed = Signal(int, object)

    def __init__(self, tools: AppTools, run_id: int, model_id: str, messages: list[dict[str, Any]],
                 sampling: Sampling, *, servers: list[str], max_steps: int, allowed: set[tuple[str, str]],
                 tool_choice: str | dict = "auto", prepare: Callable[[list], list] | None = None,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.tools, self.run_id, self.model_id = tools, run_id, model_id
        self.messages, self.sampling, self.servers = messages, sampling, servers
        self.max_steps, self.tool_choice = max_steps, tool_choice
        self._prepare = prepare  # on the run's thread, before the first round: the chat's saved images, decoded
        self.allowed = set(allowed)
        self.cancel = threading.Event()
        self._waiting: dict[str, tuple[threading.Event, list[str]]] = {}
        self._lock = threading.Lock()
        self._batcher = TextBatcher(lambda kind, text: self.text.emit(self.run_id, kind, text))
        self._thread = threading.Thread(target=self._run, name=f"fireside-tools-{run_id}", daemon=True)

    def start(self) -> None:
        self.tools.track(self, True)
        self._thread.start()

    def decide(self, call_id: str, decision: str) -> None:
        """The user's answer for call ``call_id``: ``run``, ``deny``, ``chat`` (always in this chat) or
        ``always``. Called on the GUI thread; only sets the call's event."""
        with self._lock:
            entry = self._waiting.pop(call_id, None)
        if entry is not None:
            entry[1].append(decision)
            entry[0].set()

    def stop(self) -> None:
        """End the reply: between tokens, between calls, and any wait for approval. Safe from any thread."""
        self.cancel.set()
        with self._lock:
            waiting, self._waiting = list(self._waiting.values()), {}
        for event, _answer in waiting:
            event.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout)

    # --- the run's thread ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            if self._prepare is not None:
                self.messages = self._prepare(self.messages)
            hub = self.tools.hub()
            found, errors = hub.all_tools(self.servers)
            for name, error in errors.items():
                self.problem.emit(self.run_id, f"the tools of MCP server {name!r} are not available: {error}")
            loop = ToolLoop(self.tools.engine, hub, found, self._approve, max_steps=self.max_steps,
                            on_chunk=self._on_chunk, on_step=self._on_step)
            result = loop.run(self.model_id, self.messages, self.sampling, self.cancel, self.tool_choice)
        except Exception as exc:
            self._batcher.flush()
            self.failed.emit(self.run_id, exc)
        else:
            self._batcher.flush()
            self.finished.emit(self.run_id, result)
        finally:
            self.tools.track(self, False)

    def _approve(self, call: PendingCall) -> str:
        self._batcher.flush()
        key = (call.server, call.tool)
        if key in self.allowed:
            self.call_started.emit(self.run_id, call)
            return "run"
        event, answer = threading.Event(), []
        with self._lock:
            self._waiting[call.id] = (event, answer)
        if not self.cancel.is_set():  # after Stop there is no card to wait for
            self.approval_requested.emit(self.run_id, call)
            event.wait()
        if self.cancel.is_set():
            # The loop checks its cancel event after approval and reports the call stopped, unrun;
            # "deny" would tell the model the user refused it, which is not what happened.
            return "run"
        decision = answer[0] if answer else "deny"
        if decision in ("chat", "always"):
            self.allowed.add(key)
        if decision == "deny":
            return "deny"
        self.call_started.emit(self.run_id, call)
        return "run"

    def _on_chunk(self, chunk: Chunk) -> None:
        if chunk.kind == "done":
            self._batcher.flush()
            self.round_ended.emit(self.run_id, chunk)
        else:
            self._batcher.add(chunk)

    def _on_step(self, step: ToolStep) -> None:
        self.step_done.emit(self.run_id, step)

