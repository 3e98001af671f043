"""What a chat card shows: it wraps to the window (no sideways scrolling, Edit and Regenerate in view,
however long the stats line), your text exactly as typed, and the model's Markdown without raw HTML."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

LONG_STATS = {"decode_tokens_per_s": 3.1, "ttft_s": 2.74, "completion_tokens": 60, "finish_reason": "length",
              "prompt_tokens": 20}


def _branched_chat(store):
    """A question with two replies (a ‹ 2/2 › switcher) whose stats line is long."""
    conv = store.create_conversation("Wrap", "bartowski/SmolLM2-135M-Instruct-GGUF:SmolLM2-135M-Instruct-Q4_1")
    user = store.add_message(conv.id, None, "user", "Tell me about foxes, please, in some detail.")
    for text in ("Foxes are small omnivores.", "A fox is a small member of the dog family."):
        reply = store.add_message(conv.id, user.id, "assistant", text, "complete", conv.model_id)
        store.update_message(reply.id, stats=LONG_STATS)
    return conv, user, reply


def _inside(widget, viewport) -> bool:
    rect = widget.rect().translated(widget.mapTo(viewport, widget.rect().topLeft()))
    return widget.isVisible() and viewport.rect().contains(rect)


@pytest.mark.parametrize("width", [900, 1100])
def test_cards_wrap_without_sideways_scrolling(qtbot, make_app, shared_runtime, width):
    app = make_app(shared_runtime)
    conv, user, reply = _branched_chat(app.ctx.store)
    page = app.window.chat
    app.window.resize(width, 700)
    page.open_conversation(conv.id)
    transcript = page.transcript
    card = transcript.view(reply.id)
    assert card.branch_label.isVisible() and "hit the token limit" in card.stats.text()
    QApplication.sendPostedEvents()  # the layout requests the new cards posted
    QApplication.processEvents()
    assert transcript.widget().width() <= transcript.viewport().width(), "the cards are wider than the window"
    bar = transcript.horizontalScrollBar()
    assert not bar.isVisible() or bar.maximum() == 0, f"sideways scrolling: range {bar.maximum()}"
    viewport = transcript.viewport()
    assert _inside(card.regenerate_button, viewport), "Regenerate is cut off at the right edge"
    assert _inside(transcript.view(user.id).edit_button, viewport), "Edit is cut off at the right edge"
    stats = card.stats
    assert stats.heightForWidth(stats.width()) <= stats.height(), "the wrapped stats line is cut off"


def test_your_text_is_shown_exactly_as_typed(qtbot):
    from fireside.app.chat.messagecard import MessageView
    from fireside.app.store import Message

    typed = "<think>\nwhy is **this** `<b>` not bold?\n\n<div>x</div> & done"
    card = MessageView(Message(1, 1, None, "user", typed, "complete", None, 0.0), (0, 1))
    qtbot.addWidget(card)
    assert card.body.toPlainText() == typed


def test_model_markdown_renders_but_raw_html_stays_text(qtbot):
    from fireside.app.chat.messagecard import MessageView
    from fireside.app.store import Message

    text = "<think>\nplanning\n</think>\n\nA **bold** word and <b>a tag</b>.\n\n<div>block</div>"
    card = MessageView(Message(2, 1, 1, "assistant", text, "complete", "m", 0.0), (0, 1))
    qtbot.addWidget(card)
    shown = card.body.toPlainText()
    assert "<think>" in shown and "</think>" in shown and "<b>a tag</b>" in shown and "<div>block</div>" in shown
    assert "**" not in shown, "the model's Markdown was not rendered"
    assert "font-weight:700" in card.body.toHtml()
    card.set_content(text, reasoning="maybe <b>bold</b>?", reasoning_s=1.0)
    assert card.reasoning.textFormat() == Qt.PlainText and "<b>bold</b>" in card.reasoning.text()


def test_a_failed_reply_offers_retry(qtbot):
    from fireside.app.chat.messagecard import MessageView
    from fireside.app.store import Message

    card = MessageView(Message(3, 1, 1, "assistant", "half a repl", "error", "m", 0.0), (0, 1))
    qtbot.addWidget(card)
    card.show()
    assert card.retry_button.isVisible() and "the reply failed" in card.stats.text()
    with qtbot.waitSignal(card.retry_requested) as asked:
        card.retry_button.click()
    assert asked.args == [3]
    card.set_stats({"completion_tokens": 5}, "complete")
    assert not card.retry_button.isVisible()


def test_the_stats_line_shows_the_share_of_drafted_tokens_accepted():
    from fireside.app.chat.messagecard import format_stats
    from fireside.engine.types import Usage

    drafted = {"finish_reason": "stop", **Usage(completion_tokens=50, draft_tokens=40, accepted_draft_tokens=30).to_dict()}
    assert "drafts 30/40 accepted (75%)" in format_stats(drafted)
    plain = {"finish_reason": "stop", **Usage(completion_tokens=50).to_dict()}
    assert "drafts" not in format_stats(plain)


def test_a_new_message_keeps_the_cards_already_shown(qtbot):
    """Each Send showed the thread again by building every card (each renders its Markdown): by the
    eighth turn the window froze for 150 ms (bench/gui.py). Cards showing a message as it is stay;
    a changed message gets a card of its new text; a branch switched
    away from loses its cards; the order is the thread's."""
    from fireside.app.chat.transcript import Transcript
    from fireside.app.store import Message

    def msg(i, text, parent, role="assistant"):
        return Message(i, 1, parent, role, text, "complete", "m", 0.0)

    transcript = Transcript()
    qtbot.addWidget(transcript)
    thread = [msg(1, "hi", None, "user"), msg(2, "Hello **there**", 1), msg(3, "more", 2, "user")]
    transcript.show_thread(thread, {})
    first = [transcript.view(m.id) for m in thread]
    first[1].set_content("Hello **there**", reasoning="a thought", reasoning_s=None)
    first[1].thought.setChecked(True)

    reply = msg(4, "Sure", 3)
    transcript.show_thread([msg(1, "hi", None, "user"), msg(2, "Hello **there**", 1, ), msg(3, "more", 2, "user"),
                            reply], {})
    assert transcript.view(1) is first[0] and transcript.view(3) is first[2]
    assert transcript.view(2) is not first[1], "its message changed (a reasoning shown, not stored): built again"

    edited = msg(5, "more, edited", 2, "user")
    thread = [msg(1, "hi", None, "user"), msg(2, "Hello **there**", 1), edited]
    transcript.show_thread(thread, {5: (1, 2)})
    assert transcript.view(1) is first[0] and transcript.view(3) is None and transcript.view(4) is None
    assert transcript.view(5).body.toPlainText() == "more, edited" and transcript.view(5).branch_label.text() == "2/2"
    shown = [transcript.column.itemAt(i).widget() for i in range(transcript.column.count() - 1)]
    assert shown == [transcript.view(1), transcript.view(2), transcript.view(5)]
    assert transcript.column.itemAt(transcript.column.count() - 1).spacerItem() is not None  # the stretch, last
