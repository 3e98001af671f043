"""The GUI thread never waits on the OS keyring, package metadata, a walk of the disk, an ``fsync`` (the
preferences are saved on the task pool) or a write to a database other than the chats' (whose small WAL
writes are there by design): every page is
driven the way a user would (a chat reply and the load dialog, a hub search and download, imports and a
delete in My Models, the API server started and stopped, the token and a remote engine saved and
removed in Settings), with those calls wrapped to record any made on the main thread."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtWidgets import QDialog

from fireside.engine.hub.hub import Hub
from tests.helpers.driving import send
from tests.helpers.gguf_builder import build_gguf
from tests.helpers.guithread import GuiThreadIO
from tests.helpers.hubfixtures import Q4, run_fakehub
from tests.helpers.waiting import free_port

pytestmark = pytest.mark.model
fakehub = pytest.fixture(run_fakehub)


def test_no_page_does_blocking_io_on_the_gui_thread(qtbot, make_app, loaded_runtime, fakehub, tmp_path, monkeypatch):
    guard = GuiThreadIO.armed(monkeypatch, expected_db=("chats.sqlite3",))
    app = make_app(loaded_runtime)  # start-up too: the starter model and the library floors are read on workers
    hub_settings = replace(app.ctx.settings, hf_endpoint=fakehub.url)
    app.ctx.extras["hub_factory"] = lambda: Hub(hub_settings)  # the real hub: it reads the token from the keyring
    _chat(qtbot, app)
    _discover(qtbot, app)
    _my_models(qtbot, app, tmp_path)
    _server(qtbot, app)
    _settings(qtbot, app, tmp_path)
    assert not guard.calls, guard.report()


def _chat(qtbot, app) -> None:
    page = app.window.chat
    app.window.show_page("Chat")
    page.new_chat()
    page.model_bar.set_model("starter")
    _, state = send(qtbot, page, "Hi", max_tokens=4)
    assert state == "complete"
    page.model_bar._on_settings_clicked()  # the Load... dialog reads the model's header
    dialog = page.model_bar.findChild(QDialog)
    qtbot.waitUntil(lambda: dialog.info is not None, timeout=10_000)
    dialog.reject()


def _discover(qtbot, app) -> None:
    page = app.window.pages["Discover"]
    app.window.show_page("Discover")
    page.query.setText("smol")
    page.search()
    qtbot.waitUntil(lambda: page.results.rowCount() >= 1, timeout=15_000)
    page.results_view.selectRow(0)
    qtbot.waitUntil(lambda: page.files.rowCount() == 2 and len(page.fits) == 2, timeout=15_000)
    page.files_view.selectRow(next(i for i, f in enumerate(page.files.rows) if f.name == Q4))
    with qtbot.waitSignal(page.downloads.model_added, timeout=30_000) as done:
        page.download.click()
    assert done.args[0].state == "done"


def _my_models(qtbot, app, tmp_path) -> None:
    page = app.window.pages["My Models"]
    app.window.show_page("My Models")
    build_gguf(tmp_path / "elsewhere" / "deep" / "Other-Q8_0.gguf")
    page.import_folder(tmp_path / "elsewhere")  # walks the folder: on a worker

    def imported():
        return next((m for m in page.table_model.rows if m.path.name == "Other-Q8_0.gguf"), None)
    qtbot.waitUntil(lambda: imported() is not None, timeout=10_000)
    page.delete(imported().id)  # unloads, then deletes, in one task
    qtbot.waitUntil(lambda: imported() is None, timeout=10_000)


def _server(qtbot, app) -> None:
    page = app.window.pages["Server"]
    app.window.show_page("Server")
    page.port.setValue(free_port())
    page.key.setText("k" * 32)
    page.start_server()  # keeps the key in the keyring and binds the port: on workers
    qtbot.waitUntil(page.running, timeout=15_000)
    page.stop_server()
    qtbot.waitUntil(lambda: page.toggle.isEnabled() and not page.running(), timeout=15_000)


def _settings(qtbot, app, tmp_path) -> None:
    page = app.window.pages["Settings"]
    app.window.show_page("Settings")
    page.token.setText("hf_gui_thread")
    page._on_save_token_clicked()
    qtbot.waitUntil(lambda: "saved in the keyring" in page.token_state.text(), timeout=5_000)
    page._on_remove_token_clicked()
    qtbot.waitUntil(lambda: page.token_state.text() == "No token saved.", timeout=5_000)
    box = page.remotes
    box.name.setText("lab")
    box.url.setText(f"http://127.0.0.1:{free_port()}/v1")
    box.key.setText("sk-lab")  # kept in the keyring, asked for it first: on a worker
    box.add_button.click()
    qtbot.waitUntil(lambda: any(box.remotes.item(i).text().startswith("lab — ") for i in range(box.remotes.count())),
                    timeout=15_000)
    box.remotes.setCurrentRow(0)
    # a second refresh (the remotes file's watcher) may still hold the buttons: a click then does nothing
    qtbot.waitUntil(box.remove_button.isEnabled, timeout=15_000)
    box.remove_button.click()
    qtbot.waitUntil(lambda: box.remotes.item(0).text() == "No remote engines yet.", timeout=15_000)
    page.add_folder(tmp_path / "more-models")
    page.refresh_hardware()
    qtbot.waitUntil(lambda: "Backends" in page.hardware.text(), timeout=10_000)
