"""Conversation list and per-chat settings, without generating: delete with undo, rename, search, the
system prompt and sampling kept per chat, the folded reasoning, the context meter's warning, the
first-run button, and the start-up sequence with its shutdown in reverse."""

from __future__ import annotations

import logging

import pytest

from fireside.app.chat.messagecard import MessageView
from fireside.app.store import Message


@pytest.fixture
def idle_app(make_app, shared_runtime):
    return make_app(shared_runtime)


def _seed(store, title: str, text: str = "hello"):
    conv = store.create_conversation(title, "starter")
    user = store.add_message(conv.id, None, "user", text)
    store.add_message(conv.id, user.id, "assistant", "hi there", model_id="starter")
    return conv


def test_delete_offers_undo_and_undo_restores(qtbot, idle_app):
    store, page, window = idle_app.ctx.store, idle_app.window.chat, idle_app.window
    conv = _seed(store, "Keep me")
    page.conversations.refresh()
    page.open_conversation(conv.id)
    page.delete_conversation(conv.id)
    assert page.conversations.model.rowCount() == 0 and page.conv_id is None
    assert window.notice.isVisible() and window.notice.action.text() == "Undo"
    window.notice.action.click()
    assert [c.title for c in page.conversations.model.items] == ["Keep me"]
    assert page.conv_id == conv.id and len(page.transcript.views) == 2


def test_rename_and_search(qtbot, idle_app):
    store, page = idle_app.ctx.store, idle_app.window.chat
    _seed(store, "Cats", "tell me about whiskers")
    _seed(store, "Dogs", "tell me about barking")
    page.conversations.refresh()
    model = page.conversations.model
    assert model.setData(model.index(model.row_of(model.items[0].id)), "Puppies")
    qtbot.keyClicks(page.conversations.search, "whisk")
    assert [c.title for c in model.items] == ["Cats"]
    page.conversations.search.clear()
    assert sorted(c.title for c in model.items) == ["Cats", "Puppies"]


def test_system_prompt_and_sampling_are_kept_per_chat(qtbot, idle_app):
    store, page = idle_app.ctx.store, idle_app.window.chat
    a, b = _seed(store, "A"), _seed(store, "B")
    page.conversations.refresh()
    page.open_conversation(a.id)
    page.settings_panel.system_prompt.setPlainText("Answer like a pirate.")
    page.settings_panel.temperature.setValue(1.3)
    page.open_conversation(b.id)
    assert page.settings_panel.system_prompt.toPlainText() == ""
    page.open_conversation(a.id)
    assert page.settings_panel.system_prompt.toPlainText() == "Answer like a pirate."
    assert store.conversation(a.id).sampling["temperature"] == pytest.approx(1.3)


def test_reasoning_is_folded_with_its_duration(qtbot):
    msg = Message(1, 1, None, "assistant", "The answer is 4.", "complete", "m", 0.0,
                  reasoning="two plus two is four", reasoning_s=3.2)
    view = MessageView(msg, (0, 1))
    qtbot.addWidget(view)
    view.show()
    assert view.thought.isVisible() and view.thought.text() == "Thought for 3 s"
    assert not view.reasoning.isVisible()
    view.thought.click()
    assert view.reasoning.isVisible() and "two plus two" in view.reasoning.text()


def test_code_blocks_get_a_copy_link(qtbot, qapp):
    msg = Message(1, 1, None, "assistant", "Try:\n```python\nprint('hi')\n```\n", "complete", "m", 0.0)
    view = MessageView(msg, (0, 1))
    qtbot.addWidget(view)
    assert view.code_blocks == ["print('hi')"]
    from PySide6.QtCore import QUrl

    view._on_body_anchor_clicked(QUrl("copy:0"))
    assert qapp.clipboard().text() == "print('hi')"


@pytest.mark.model  # loaded_runtime loads SmolLM2
def test_context_meter_warns_before_overflow(qtbot, idle_app, loaded_runtime):
    page = idle_app.window.chat
    page.model_bar.set_model("starter")
    page._update_meter({"prompt_tokens": 1900, "completion_tokens": 50})
    assert page.meter.maximum() == 2048 and "almost full" in page.meter.format()
    page._update_meter({"prompt_tokens": 100, "completion_tokens": 20})
    assert "almost full" not in page.meter.format()


@pytest.mark.model  # the button loads SmolLM2
def test_first_run_start_button_loads_the_starter(qtbot, idle_app, shared_runtime):
    page = idle_app.window.chat
    assert page.stack.currentWidget() is page.empty
    if shared_runtime.is_loaded("starter"):  # loaded by an earlier test: nothing to offer (issue 45)
        assert not page.start_button.isVisible() and "starter is loaded" in page.ready.text()
        return
    assert page.start_button.isVisible()
    with qtbot.waitSignal(page.model_bar.model_ready, timeout=60_000):
        page.start_button.click()
    assert page.model_bar.current() == "starter" and page.model_bar.eject_button.isEnabled()
    qtbot.waitUntil(lambda: not page.start_button.isVisible(), timeout=5_000)  # loaded: the offer goes
    page.new_chat()
    assert not page.start_button.isVisible() and "starter is loaded" in page.ready.text()


def test_startup_is_logged_step_by_step_and_shutdown_reverses_it(make_app, shared_runtime, caplog):
    caplog.set_level(logging.INFO, logger="fireside.app")
    app = make_app(shared_runtime)
    app.stop()
    lines = [r.getMessage() for r in caplog.records if r.name == "fireside.app"]
    steps = [line[:3] for line in lines if line[1:2] == "/"]
    assert steps == [f"{i}/8" for i in range(1, 9)]
    down = [line for line in lines if line.startswith("shutdown:")]
    assert down[0].startswith("shutdown: window") and down[-1] == "shutdown: chats database closed"


def test_a_new_chat_takes_the_models_default_system_prompt(qtbot, idle_app):
    page = idle_app.window.chat
    idle_app.ctx.prefs.put("model_defaults", "starter", {"system_prompt": "Be brief."})
    page.model_bar.set_model("starter")
    conv_id = page._ensure_conversation("hello", "starter")
    assert idle_app.ctx.store.conversation(conv_id).system_prompt == "Be brief."


def test_closing_the_window_quits_unless_a_server_stays_in_the_tray(idle_app, monkeypatch):
    from fireside.app import main as app_main

    quits = []

    class _App:
        def quit(self):
            quits.append(True)

    app_main._on_close(idle_app, _App())
    assert quits == [True], "no tray here: closing the window quits"
