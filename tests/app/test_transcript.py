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
    from fireside.app.chat.transcript import MessageView
    from fireside.app.store import Message

    typed = "<think>\nwhy is **this** `<b>` not bold?\n\n<div>x</div> & done"
    card = MessageView(Message(1, 1, None, "user", typed, "complete", None, 0.0), (0, 1))
    qtbot.addWidget(card)
    assert card.body.toPlainText() == typed


def test_model_markdown_renders_but_raw_html_stays_text(qtbot):
    from fireside.app.chat.transcript import MessageView
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
    from fireside.app.chat.transcript import MessageView
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
    from fireside.app.chat.transcript import format_stats
    from fireside.engine.types import Usage

    drafted = {"finish_reason": "stop", **Usage(completion_tokens=50, draft_tokens=40, accepted_draft_tokens=30).to_dict()}
    assert "drafts 30/40 accepted (75%)" in format_stats(drafted)
    plain = {"finish_reason": "stop", **Usage(completion_tokens=50).to_dict()}
    assert "drafts" not in format_stats(plain)
