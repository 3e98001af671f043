"""The chat session without a single widget: the real SmolLM2 through the real bridge into a real SQLite
store. Each batch is saved before it is offered to a view; Stop keeps what was streamed; Regenerate and
edit make branches that flip; a reply with tools waits for approval on its own thread while the GUI
thread stays free, and the answer given from a slot on the GUI thread runs the call."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import QObject, QThread, Slot
from PySide6.QtWidgets import QApplication

from fireside.app.bridge import EngineBridge, Tasks
from fireside.app.bridge.tools import AppTools
from fireside.app.chat.request import request_messages
from fireside.app.chat.session import ChatSession
from fireside.app.prefs import Prefs
from fireside.app.store import Store
from fireside.engine.mcp import McpConfig
from fireside.engine.settings import Settings
from tests.helpers.mcp_fixtures import stdio_server
from tests.helpers.mcp_server import MARKER

pytestmark = pytest.mark.model
SHORT = {"temperature": 0.0, "max_tokens": 8, "seed": 1}


class _Models:
    """What the session asks of the model bar: the model on show, and whether it can answer now."""

    def __init__(self, runtime):
        self.runtime = runtime

    def current(self) -> str:
        return "starter"

    def ensure_loaded(self, model_id: str) -> bool:
        return self.runtime.is_loaded(model_id)


class _Approver(QObject):
    """Answers each tool call from a slot on the GUI thread, recording which threads were involved."""

    def __init__(self, session: ChatSession, decision: str):
        super().__init__()
        self.session, self.decision = session, decision
        self.slot_threads: list[QThread] = []
        self.waiting_threads: list[str] = []
        session.tool_changed.connect(self._on_session_tool_changed)

    @Slot(object)
    def _on_session_tool_changed(self, msg) -> None:
        if msg.state == "pending":
            self.slot_threads.append(QThread.currentThread())
            self.waiting_threads.append(self.session.tool_turn.run._thread.name)
            self.session.decide(msg.id, self.decision)


@pytest.fixture
def session(qapp, tmp_path, loaded_runtime):
    tasks = Tasks()
    settings = Settings.from_env()
    tools = AppTools(settings, loaded_runtime)
    store = Store(tmp_path / "chats.sqlite3")
    s = ChatSession(store, EngineBridge(loaded_runtime, tasks), Prefs(tmp_path / "app.json"), _Models(loaded_runtime),
                    tools)
    yield s
    s.dispose()
    tools.close()
    tasks.close()
    store.close()


def ask(qtbot, session: ChatSession, text: str, sampling=SHORT, tools=None):
    with qtbot.waitSignal(session.reply_ended, timeout=120_000) as ended:
        assert session.send(text, "", sampling, tools)
    return ended.args


def test_a_reply_streams_into_the_store_before_it_is_shown(qtbot, session):
    saved_when_shown = []
    session.message_grew.connect(lambda m: saved_when_shown.append(session.store.message(m.id).content == m.content))
    reply_id, state = ask(qtbot, session, "Say hello.")
    assert state == "complete" and saved_when_shown and all(saved_when_shown)
    reply = session.store.message(reply_id)
    assert reply.content.strip() and reply.stats["completion_tokens"] > 0
    assert [m.role for m in session.thread()[0]] == ["user", "assistant"]
    assert not session.busy and QApplication.topLevelWidgets() == [], "the session made no widget"


def test_stop_keeps_what_was_streamed(qtbot, session):
    with qtbot.waitSignal(session.message_grew, timeout=60_000):
        session.send("Write a long story about a dragon.", "", {"max_tokens": 400, "seed": 1})
    with qtbot.waitSignal(session.reply_ended, timeout=30_000) as ended:
        session.stop()
    reply_id, state = ended.args
    reply = session.store.message(reply_id)
    assert state == "stopped" and reply.content and reply.stats["completion_tokens"] < 400


def test_regenerate_and_edit_make_branches_that_flip(qtbot, session):
    first, _ = ask(qtbot, session, "Name a colour.")
    with qtbot.waitSignal(session.reply_ended, timeout=120_000) as ended:
        session.regenerate(first)
    second = ended.args[0]
    store = session.store
    assert store.siblings(store.message(second)) == [first, second]
    session.flip_branch(second, -1)
    assert session.thread()[0][-1].id == first
    question = session.thread()[0][0]
    session.start_edit(question.id)
    ask(qtbot, session, "Name a fruit.")
    messages, branches = session.thread()
    assert messages[0].content == "Name a fruit." and branches[messages[0].id] == (1, 2)


def test_a_tool_call_waits_on_its_own_thread_and_a_gui_slot_runs_it(qtbot, session, qapp):
    McpConfig(Settings.from_env()).add(stdio_server("tests"))
    session.tool_turn.tool_choice = {"type": "function", "function": {"name": "weather"}}
    approver = _Approver(session, "run")
    reply_id, state = ask(qtbot, session, "What is the weather in Paris today?",
                          {**SHORT, "max_tokens": 24}, {"servers": ["tests"], "max_steps": 1})
    assert state == "complete"
    assert approver.slot_threads == [qapp.thread()], "the answer was given on the GUI thread"
    assert approver.waiting_threads[0].startswith("fireside-tools"), "the call waited on the run's own thread"
    assert threading.main_thread().name not in approver.waiting_threads
    roles = [m.role for m in session.thread()[0]]
    assert roles == ["user", "assistant", "tool", "assistant"] and session.thread()[0][-1].id == reply_id
    assert MARKER in session.thread()[0][2].content
    assert request_messages(session.store, session.conv_id)[2]["role"] == "tool"
    assert session.store.message(reply_id).stats["tool_step_limit"] == 1, "the chat's step limit was kept"


def test_always_allow_in_this_chat_runs_the_next_call_without_asking(qtbot, session):
    McpConfig(Settings.from_env()).add(stdio_server("tests"))
    session.tool_turn.tool_choice = {"type": "function", "function": {"name": "weather"}}
    approver = _Approver(session, "chat")
    tools = {"servers": ["tests"], "max_steps": 1}
    ask(qtbot, session, "What is the weather in Paris today?", {**SHORT, "max_tokens": 24}, tools)
    ask(qtbot, session, "And in Lisbon?", {**SHORT, "max_tokens": 24}, tools)
    assert len(approver.slot_threads) == 1, "the second call did not ask again"
    calls = [m for m in session.thread()[0] if m.role == "tool"]
    assert [(m.tool["outcome"], MARKER in m.content) for m in calls] == [("run", True), ("run", True)]
    assert session.prefs.get("tools_always_allowed") is None, "this chat only: nothing kept for other chats"


def test_a_server_that_cannot_start_is_reported_and_the_reply_goes_on_without_it(qtbot, session, tmp_path):
    from fireside.app import feedback
    from fireside.engine.mcp import McpServer

    McpConfig(Settings.from_env()).add(McpServer(name="broken", command=str(tmp_path / "no-such-program")))
    reply_id, state = ask(qtbot, session, "Say hello.", SHORT, {"servers": ["broken"], "max_steps": 2})
    assert state == "complete" and session.store.message(reply_id).content.strip()
    assert any("broken" in line and "not available" in line for line in feedback.history)
    assert [m.role for m in session.thread()[0]] == ["user", "assistant"]
