"""How tests drive the app and the servers: small load options, one chat turn typed and sent, the key
of the keyed test server. Kept here, not in a conftest, so test modules import them from one place."""

from __future__ import annotations

from fireside.engine.models.fitplan import LoadOptions

SMALL = LoadOptions(context=2048)  # a short context: SmolLM2 loads in a moment on two cores
API_KEY = "test-key-0123456789"  # the key of tests/server/conftest.py's keyed server


def send(qtbot, page, text: str, max_tokens: int = 8, timeout: int = 60_000):
    """Type ``text``, press Send and wait for the reply to end; returns (reply id, state)."""
    page.settings_panel.max_tokens.setValue(max_tokens)
    page.composer.setPlainText(text)
    with qtbot.waitSignal(page.reply_ended, timeout=timeout) as blocker:
        page.send_button.click()
    return blocker.args


def open_load_dialog(qtbot, app, model_id: str = "starter"):
    """Open the chat's load dialog for ``model_id`` with Auto settings, once it has read the model."""
    from PySide6.QtWidgets import QDialog

    bar = app.window.chat.model_bar
    app.ctx.prefs.put("load_options", model_id, {})
    bar.set_model(model_id)
    bar.settings_button.click()
    dialog = bar.findChild(QDialog)
    qtbot.waitUntil(lambda: dialog.info is not None, timeout=20_000)
    return dialog
