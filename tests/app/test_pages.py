"""Settings, My Models and Server pages: what a user changes there takes effect and is kept."""

from __future__ import annotations

import httpx
import keyring
import pytest
from keyring.backends import fail

from fireside.app import feedback
from fireside.app.windows.models import COLUMNS, ModelsTableModel
from tests.helpers.driving import SMALL
from tests.helpers.gguf_builder import build_gguf
from tests.helpers.waiting import free_port


@pytest.fixture
def idle_app(make_app, shared_runtime):
    """The app without loading a model: these pages never generate."""
    return make_app(shared_runtime)


def test_theme_switch_applies_and_is_remembered(qtbot, idle_app, qapp):
    page = idle_app.window.pages["Settings"]
    page.theme.setCurrentText("Dark")
    assert qapp.palette().color(qapp.palette().ColorRole.Window).lightness() < 128
    assert idle_app.ctx.prefs.get("theme") == "dark"
    page.theme.setCurrentText("Light")
    assert qapp.palette().color(qapp.palette().ColorRole.Window).lightness() > 128


def test_hub_token_goes_to_the_keyring(qtbot, idle_app, memory_keyring):
    page = idle_app.window.pages["Settings"]
    idle_app.window.show_page("Settings")  # shown, so the notice's visibility means something
    qtbot.waitUntil(lambda: page.token_state.text() == "No token saved.", timeout=5_000)
    assert page.isVisible() and not page.keyring_notice.isVisible()  # a keyring exists: no warning
    page.token.setText("hf_secret")
    _click(page, "Save")
    qtbot.waitUntil(lambda: "saved in the keyring" in page.token_state.text(), timeout=5_000)
    assert "hf_secret" in memory_keyring.store.values() and page.token.text() == ""
    prefs = idle_app.ctx.prefs.path
    assert not prefs.exists() or "hf_secret" not in prefs.read_text()


def test_no_keyring_shows_a_notice_and_a_clear_error(qtbot, make_app, shared_runtime):
    keyring.set_keyring(fail.Keyring())
    app = make_app(shared_runtime)
    page = app.window.pages["Settings"]
    app.window.show_page("Settings")
    qtbot.waitUntil(page.keyring_notice.isVisible, timeout=5_000)
    page.token.setText("hf_secret")
    assert not page.save_token.isEnabled() and "No OS keyring" in page.save_token.toolTip()  # issue 45
    page._on_save_token_clicked()  # were it pressed anyway (the keyring went away since): a clear error
    qtbot.waitUntil(lambda: bool(feedback.history) and "keyring" in feedback.history[-1], timeout=5_000)
    assert app.window.notice.isVisible() and page.token.text() == "hf_secret"  # kept, to try again


def test_hardware_is_shown(qtbot, idle_app):
    page = idle_app.window.pages["Settings"]
    qtbot.waitUntil(lambda: "Backends" in page.hardware.text(), timeout=10_000)
    assert "CPU" in page.hardware.text()
    assert "Engine build:</b> built by pip on this machine" in page.hardware.text()


def test_added_models_folder_is_listed_in_my_models(qtbot, idle_app, tmp_path, qtmodeltester):
    build_gguf(tmp_path / "extra" / "me" / "tiny" / "tiny-F32.gguf")
    idle_app.window.pages["Settings"].add_folder(tmp_path / "extra")
    models = idle_app.window.pages["My Models"]
    models.refresh()
    qtbot.waitUntil(lambda: models.table_model.rowCount() == 2, timeout=10_000)
    ids = [m.id for m in models.table_model.rows]
    assert ids[0] == "starter" and "tiny" in ids[1]
    assert idle_app.ctx.prefs.get("models_dirs") == [str(tmp_path / "extra")]
    qtmodeltester.check(models.table_model, force_py=True)
    qtmodeltester.check(models.proxy)


def test_models_table_model_passes_the_model_tester(qtmodeltester):
    model = ModelsTableModel()
    qtmodeltester.check(model)
    assert model.columnCount() == len(COLUMNS)


def test_import_file_and_delete(qtbot, idle_app, tmp_path):
    src = build_gguf(tmp_path / "outside" / "Other-Q8_0.gguf")
    page = idle_app.window.pages["My Models"]
    page.import_paths([src])
    qtbot.waitUntil(lambda: page.table_model.rowCount() == 2, timeout=10_000)
    imported = page.table_model.rows[1]
    assert imported.source == "import"
    page.delete(imported.id)
    qtbot.waitUntil(lambda: page.table_model.rowCount() == 1, timeout=10_000)
    assert src.exists(), "deleting an import must leave the other app's file alone"


def test_server_starts_answers_logs_and_stops(qtbot, idle_app):
    page = idle_app.window.pages["Server"]
    page.port.setValue(free_port())
    page.start_server()
    qtbot.waitUntil(page.running, timeout=15_000)
    assert page.url() in page.snippet_views["curl"].toPlainText()
    assert f"fireside launch claude --model starter --url {page.url()}" in page.snippet_views["Claude Code"].toPlainText()
    assert "Server running" in page.status_text()
    r = httpx.get(f"{page.url()}/v1/models", timeout=10)
    assert r.status_code == 200 and any(m["id"] == "starter" for m in r.json()["data"])
    qtbot.waitUntil(lambda: "/v1/models" in page.log.toPlainText(), timeout=5_000)
    page.stop_server()
    qtbot.waitUntil(lambda: page.toggle.isEnabled() and not page.running(), timeout=15_000)
    assert page.toggle.text() == "Start server"


@pytest.mark.model  # it loads SmolLM2 and generates through the server
def test_just_in_time_loading_can_be_turned_off(qtbot, idle_app):
    page = idle_app.window.pages["Server"]
    page.port.setValue(free_port())
    page.jit.setChecked(False)
    page.start_server()
    qtbot.waitUntil(page.running, timeout=15_000)
    assert not page.jit.isEnabled()  # fixed while the server runs
    body = {"model": "starter", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
    idle_app.ctx.engine.unload("starter")
    r = httpx.post(f"{page.url()}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 404 and "just-in-time loading is off" in r.json()["error"]["message"]
    idle_app.ctx.engine.load("starter", SMALL)
    r = httpx.post(f"{page.url()}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200
    page.stop_server(wait=True)
    assert idle_app.ctx.prefs.get("server")["jit"] is False  # remembered


def test_model_management_switch_opens_pull_and_delete_and_is_remembered(qtbot, idle_app, make_app, shared_runtime):
    page = idle_app.window.pages["Server"]
    assert not page.management.isChecked()  # off unless the user turns it on
    page.port.setValue(free_port())
    page.start_server()
    qtbot.waitUntil(page.running, timeout=15_000)
    gone = {"model": "nobody/none:Q4_0"}
    r = httpx.request("DELETE", f"{page.url()}/api/delete", json=gone, timeout=10)
    assert r.status_code == 403 and "--allow-management" in r.json()["error"]
    page.stop_server(wait=True)
    qtbot.waitUntil(lambda: page.management.isEnabled(), timeout=15_000)
    page.management.click()  # as a user ticks it
    page.start_server()
    qtbot.waitUntil(page.running, timeout=15_000)
    assert not page.management.isEnabled()  # fixed while the server runs
    r = httpx.request("DELETE", f"{page.url()}/api/delete", json=gone, timeout=10)
    assert r.status_code == 404 and "nobody/none" in r.json()["error"]  # allowed through; no such model
    page.stop_server(wait=True)
    assert idle_app.ctx.prefs.get("server")["management"] is True
    again = make_app(shared_runtime, idle_app.ctx.settings).window.pages["Server"]
    assert again.management.isChecked()  # remembered across a restart


def test_network_mode_forces_an_api_key(qtbot, idle_app):
    page = idle_app.window.pages["Server"]
    page.port.setValue(free_port())
    page.reach.setCurrentIndex(1)
    page.key.clear()
    page.start_server()
    qtbot.waitUntil(page.running, timeout=15_000)
    key = page.key.text()
    assert len(key) > 20 and f"Bearer {key}" in page.snippet_views["curl"].toPlainText()
    assert httpx.get(f"{page.url()}/v1/models", timeout=10).status_code == 401
    ok = httpx.get(f"{page.url()}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=10)
    assert ok.status_code == 200
    page.stop_server(wait=True)


def _click(widget, text: str) -> None:
    from PySide6.QtWidgets import QPushButton

    button = next(b for b in widget.findChildren(QPushButton) if b.text() == text)
    button.click()


@pytest.mark.model
def test_a_chat_from_the_first_run_button_shows_in_my_models_last_used(qtbot, app):
    """The starter is already loaded (by the API server, or an earlier chat): the empty chat says so
    instead of offering the first-run button (issue 45), a chat uses it, and My Models' "Last used" says
    so instead of "never"."""
    from tests.helpers.driving import send

    page = app.window.chat
    assert page.stack.currentWidget() is page.empty and not page.start_button.isVisible()
    assert "starter is loaded" in page.ready.text()
    _, state = send(qtbot, page, "Hi", max_tokens=4)
    assert state == "complete"
    models = app.window.pages["My Models"]
    app.window.show_page("My Models")
    models.refresh()

    def last_used() -> str | None:
        rows = models.table_model.rows
        row = next((i for i, m in enumerate(rows) if m.id == "starter"), None)
        index = models.table_model.index(row, COLUMNS.index("Last used")) if row is not None else None
        return models.table_model.data(index) if index is not None else None
    qtbot.waitUntil(lambda: last_used() not in (None, "never"), timeout=15_000)  # the refresh has landed
    assert last_used() == "loaded now"
    assert models.table_model.last_used["starter"] > 0  # kept for after it is unloaded ("N min ago")


@pytest.mark.model
def test_the_status_bar_shows_the_threads_a_loaded_model_uses(qtbot, app):
    label = app.window.models_label
    qtbot.waitUntil(lambda: "starter" in label.text(), timeout=10_000)
    loaded = app.ctx.engine.loaded()[0]
    assert loaded.threads_share_label() and loaded.threads_share_label() in label.text()  # "2 threads"


def test_the_status_bar_threads_stay_put_while_the_runner_adapts():
    """Issue 45: the status bar flipped between "2 threads" and "1 of 2 threads" as the runner adapted."""
    from dataclasses import replace

    from fireside.engine.types import LoadedModel

    base = LoadedModel("m", "m.gguf", 1, 2048, 0, 30, "cpu_only", 0, 0)
    busy, alone = replace(base, threads=1, thread_share=2), replace(base, threads=2, thread_share=2)
    assert busy.threads_label() != alone.threads_label()  # `fireside ps` says what it uses right now
    assert busy.threads_share_label() == alone.threads_share_label() == "2 threads"
    assert replace(base, threads=2, threads_fixed=True).threads_share_label() == "2 threads (fixed)"
