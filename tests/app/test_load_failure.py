"""A load that fails never leaves load settings behind that make every later message fail, and the
message that waited for it offers Retry. The failing option is real: the runner's llama.cpp cannot make
a quantized KV cache (``tests/helpers/picky_runner.py``), the way llama.cpp fails on one without flash
attention."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QDialog

from fireside.engine.settings import Settings
from tests.helpers.driving import send
from tests.helpers.picky_runner import picky_runner_command

pytestmark = pytest.mark.model


@pytest.fixture
def picky_runtime(tmp_path, smollm2_path):
    from fireside.engine.runtime.runtime import Runtime

    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "picky")})
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0, runner_command=picky_runner_command())
    yield runtime
    runtime.close()


def _choose_q4_in_load_dialog(qtbot, bar):
    bar.set_model("starter")
    bar.settings_button.click()
    dialog = bar.findChild(QDialog)
    qtbot.waitUntil(lambda: dialog.info is not None, timeout=20_000)
    dialog.auto.setChecked(False)
    dialog.context.setValue(2048)
    dialog.kv.setCurrentText("q4_0")
    dialog.flash.setCurrentText("Auto")
    return dialog


def test_failed_load_dialog_choice_is_not_kept(qtbot, make_app, picky_runtime):
    app = make_app(picky_runtime)
    page, prefs = app.window.chat, app.ctx.prefs
    dialog = _choose_q4_in_load_dialog(qtbot, page.model_bar)
    with qtbot.waitSignal(app.ctx.bridge.load_failed, timeout=60_000):
        dialog.accept()
    assert "q4_0" not in str((prefs.get("load_options") or {}).get("starter")), "the failed choice was saved"
    assert "unchanged" in app.window.notice.text.text()
    _id, state = send(qtbot, page, "Say hi.", max_tokens=6)
    assert state == "complete", "the next message failed: the failed load settings stuck"


def test_saved_settings_that_fail_go_back_to_auto_and_retry_answers(qtbot, make_app, picky_runtime):
    app = make_app(picky_runtime)
    page, prefs = app.window.chat, app.ctx.prefs
    prefs.put("load_options", "starter", {"context": 2048, "kv_type": "q4_0"})  # saved earlier (My Models)
    page.model_bar.set_model("starter")
    page.settings_panel.max_tokens.setValue(6)
    page.composer.setPlainText("Say hi.")
    with qtbot.waitSignal(app.ctx.bridge.load_failed, timeout=60_000):
        page.send_button.click()
    qtbot.waitUntil(lambda: page.send_button.isVisible(), timeout=5000)
    user = app.ctx.store.thread(page.conv_id)[-1]
    assert user.role == "user"
    card = page.transcript.view(user.id)
    assert card.retry_button.isVisible() and card.retry_button.isEnabled(), "the unanswered message has no Retry"
    assert "Auto" in app.window.notice.text.text()
    with qtbot.waitSignal(page.reply_ended, timeout=60_000) as ended:
        card.retry_button.click()
    assert ended.args[1] == "complete"
    thread = app.ctx.store.thread(page.conv_id)
    assert [m.role for m in thread] == ["user", "assistant"] and thread[-1].content.strip()
    assert not page.transcript.view(user.id).retry_button.isVisible()
