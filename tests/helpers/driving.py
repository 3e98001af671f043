"""How tests drive the app and the servers: small load options, one chat turn typed and sent, the key
of the keyed test server. Kept here, not in a conftest, so test modules import them from one place."""

from __future__ import annotations

from fireside.engine.models.planner import LoadOptions

SMALL = LoadOptions(context=2048)  # a short context: SmolLM2 loads in a moment on two cores
API_KEY = "test-key-0123456789"  # the key of tests/server/conftest.py's keyed server


def send(qtbot, page, text: str, max_tokens: int = 8, timeout: int = 60_000):
    """Type ``text``, press Send and wait for the reply to end; returns (reply id, state)."""
    page.settings_panel.max_tokens.setValue(max_tokens)
    page.composer.setPlainText(text)
    with qtbot.waitSignal(page.reply_ended, timeout=timeout) as blocker:
        page.send_button.click()
    return blocker.args
