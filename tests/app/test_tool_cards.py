"""A tool call's card and its export, from stored messages (no model): the arguments in full in a
scrolling box, the result as plain text (markup and links in it stay text), the card folded once
answered, and the Markdown export fencing a result that itself contains backticks."""

from __future__ import annotations

import json

from PySide6.QtWidgets import QPlainTextEdit

from fireside.app import export
from fireside.app.chat.toolcard import ToolCallView
from fireside.app.store import Message, Store

HOSTILE = '<b>bold?</b> <a href="https://example.com/x">click me</a> <img src="file:///etc/passwd">'


def _call(state: str, content: str = "", outcome: str | None = None, arguments: str = '{\n  "city": "Paris"\n}'):
    tool = {"server": "tests", "tool": "weather", "call_id": "c1", "function": "weather", "arguments": arguments}
    if outcome:
        tool["outcome"] = outcome
    return Message(5, 1, 4, "tool", content, state, None, 0.0, tool=tool)


def test_a_waiting_call_shows_everything_and_offers_the_four_answers(qtbot):
    long_args = json.dumps({"path": "/home/me/notes", "lines": list(range(200))}, indent=2)
    card = ToolCallView(_call("pending", arguments=long_args))
    qtbot.addWidget(card)
    card.resize(600, 600)
    card.show()
    qtbot.waitExposed(card)
    assert card.title.isVisible() and "tests › weather wants to run" in card.title.text()
    assert not card.toggle.isVisible(), "a waiting call cannot be folded away"
    assert card.arguments.toPlainText() == long_args, "the arguments in full"
    assert card.arguments.verticalScrollBar().maximum() > 0, "long arguments scroll inside the card"
    assert [b.text() for b in card.decision_buttons.values()] == [
        "Run", "Deny", "Always allow in this chat", "Always allow this tool"]
    assert all(b.isVisible() for b in card.decision_buttons.values())
    with qtbot.waitSignal(card.decided) as decided:
        card.decision_buttons["deny"].click()
    assert decided.args == [5, "deny"]


def test_a_result_is_plain_text_and_the_answered_card_folds(qtbot):
    card = ToolCallView(_call("complete", HOSTILE, "run"))
    qtbot.addWidget(card)
    card.show()
    qtbot.waitExposed(card)
    assert not card.details.isVisible() and not card.buttons.isVisible() and "ran" in card.toggle.text()
    card.toggle.click()
    assert card.result.isVisible() and isinstance(card.result, QPlainTextEdit) and card.result.isReadOnly()
    assert card.result.toPlainText() == HOSTILE, "markup in a result is shown as the text it is"


def test_markdown_export_fences_a_result_that_contains_backticks(tmp_path):
    store = Store(tmp_path / "c.sqlite3")
    conv = store.create_conversation("Tools", "starter")
    user = store.add_message(conv.id, None, "user", "weather?")
    calls = {"calls": [{"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}]}
    asked = store.add_message(conv.id, user.id, "assistant", "", "complete", "starter", calls)
    result = "sunny\n```\nnot the end of the block\n```"
    store.add_message(conv.id, asked.id, "tool", result, "complete", None,
                      {"server": "tests", "tool": "weather", "arguments": "{}", "outcome": "run"})
    md = export.to_markdown(store, conv.id)
    assert "**Tool call: tests › weather** (run)" in md and "````text\n" + result + "\n````" in md
    assert md.count("**starter**") == 0, "a reply that only made calls shows as its calls"
    data = json.loads(export.to_json(store, conv.id))
    assert data["messages"][1]["tool"] == calls and data["messages"][2]["tool"]["outcome"] == "run"


def test_a_long_unbroken_result_wraps_and_the_box_grows_to_show_it(qtbot):
    card = ToolCallView(_call("complete", "word " * 400, "run"))
    qtbot.addWidget(card)
    card.resize(500, 400)
    card.show()
    card.toggle.click()
    qtbot.waitExposed(card)
    box = card.result
    one_line = box.fontMetrics().lineSpacing() + 14
    assert box.height() > 3 * one_line, "a one-line result that wraps gets the height of its wrapped lines"
    assert box.height() <= box.most and box.verticalScrollBar().maximum() > 0, "up to a limit, then it scrolls"
