"""The Chat page against the real SmolLM2: a reply streams in and is saved, Stop keeps what was shown,
Regenerate and edit make branches the user can flip between, and a restarted window shows it all."""

from __future__ import annotations

import json

import pytest

from tests.helpers.driving import send

pytestmark = pytest.mark.model


def test_send_streams_a_reply_and_saves_it(qtbot, app):
    page = app.window.chat
    shown = []
    page.reply_shown.connect(lambda _id, text: shown.append(text))
    reply_id, state = send(qtbot, page, "Say hello.", max_tokens=12)
    assert state == "complete"
    assert shown and shown[-1].strip(), "no text was shown while the reply streamed"
    reply = app.ctx.store.message(reply_id)
    assert reply.content == shown[-1]
    assert reply.stats["completion_tokens"] > 0
    view = page.transcript.view(reply_id)
    assert "tok/s" in view.stats.text()
    assert reply.content.strip()[:5] in view.body.toPlainText()
    assert [m.role for m in app.ctx.store.thread(page.conv_id)] == ["user", "assistant"]
    assert page.meter.maximum() == 2048 and page.meter.value() > 0


def test_stop_mid_reply_keeps_what_was_shown(qtbot, app):
    page = app.window.chat
    page.settings_panel.max_tokens.setValue(400)
    page.composer.setPlainText("Write a long story about a dragon.")
    with qtbot.waitSignal(page.reply_shown, timeout=60_000):
        page.send_button.click()
    assert page.stop_button.isVisible()
    with qtbot.waitSignal(page.reply_ended, timeout=30_000) as ended:
        page.stop_button.click()
    reply_id, state = ended.args
    assert state == "stopped"
    reply = app.ctx.store.message(reply_id)
    assert reply.content and reply.stats["finish_reason"] == "cancelled"
    assert reply.stats["completion_tokens"] < 400
    assert page.send_button.isVisible() and not page.stop_button.isVisible()


def test_the_context_meter_counts_the_prompt_while_the_reply_streams(qtbot, app):
    """Issue 45: the meter read 0 in a new chat until the reply ended; it shows the prompt's tokens by the
    reply's first text, the same count the reply's stats give at the end."""
    page = app.window.chat
    page.new_chat()
    assert page.meter.value() == 0
    page.settings_panel.max_tokens.setValue(400)
    page.composer.setPlainText("Write a long story about a dragon.")
    with qtbot.waitSignal(page.reply_shown, timeout=60_000):
        page.send_button.click()
    qtbot.waitUntil(lambda: page.meter.value() > 0 or not page.session.busy, timeout=10_000)
    during, busy = page.meter.value(), page.session.busy
    if busy:
        with qtbot.waitSignal(page.reply_ended, timeout=30_000):
            page.stop_button.click()
    reply = app.ctx.store.thread(page.conv_id)[-1]
    assert busy, "the reply ended before the meter showed anything"
    assert during == reply.stats["prompt_tokens"] > 0


def test_regenerate_and_flip_branches(qtbot, app):
    page, store = app.window.chat, app.ctx.store
    first_id, _ = send(qtbot, page, "Name a colour.")
    with qtbot.waitSignal(page.reply_ended, timeout=60_000) as ended:
        page.transcript.view(first_id).regenerate_button.click()
    second_id = ended.args[0]
    assert second_id != first_id
    assert store.siblings(store.message(second_id)) == [first_id, second_id]
    view = page.transcript.view(second_id)
    assert view.branch_label.text() == "2/2" and view.prev_branch.isEnabled()
    view.prev_branch.click()
    assert [m.id for m in store.thread(page.conv_id)][-1] == first_id
    assert page.transcript.view(first_id).branch_label.text() == "1/2"


def test_edit_and_resend_keeps_the_old_branch(qtbot, app):
    page, store = app.window.chat, app.ctx.store
    send(qtbot, page, "What is two plus two?")
    user = store.thread(page.conv_id)[0]
    page.transcript.view(user.id).edit_button.click()
    assert page.composer.toPlainText() == "What is two plus two?" and page.edit_banner.isVisible()
    reply_id, _ = send(qtbot, page, "What is three plus three?")
    thread = store.thread(page.conv_id)
    assert [m.content for m in thread][:1] == ["What is three plus three?"]
    assert thread[-1].id == reply_id
    edited = page.transcript.view(thread[0].id)
    assert edited.branch_label.text() == "2/2"
    edited.prev_branch.click()
    assert store.thread(page.conv_id)[0].content == "What is two plus two?"


def test_restarted_window_shows_the_conversation(qtbot, make_app, loaded_runtime):
    first = make_app(loaded_runtime)
    reply_id, _ = send(qtbot, first.window.chat, "Remember me.")
    text = first.ctx.store.message(reply_id).content
    first.stop()
    second = make_app(loaded_runtime)
    page = second.window.chat
    assert page.conversations.model.items[0].title == "Remember me."
    assert page.transcript.view(reply_id).message.content == text
    assert page.conversations.current_id() == page.conv_id


def test_export_markdown_and_json(qtbot, app, tmp_path):
    page = app.window.chat
    reply_id, _ = send(qtbot, page, "Hi!")
    md, js = tmp_path / "chat.md", tmp_path / "chat.json"
    page.export(page.conv_id, "markdown", md)
    page.export(page.conv_id, "json", js)
    qtbot.waitUntil(lambda: md.exists() and js.exists())
    assert md.read_text().startswith("# Hi!") and "**You**" in md.read_text()
    data = json.loads(js.read_text())
    assert data["thread"][-1] == reply_id and len(data["messages"]) == 2
