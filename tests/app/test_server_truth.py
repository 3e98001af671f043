"""The Server page tells the truth about what listens (issue 45): sharing listens on the network by
itself, so the page and the status bar say so, with an address another device can use (not 0.0.0.0);
sharing left on at the last quit comes back only once the window is up, and says so; and the request
log keeps logging once sharing has run (its listener used to empty uvicorn's access log handlers)."""

from __future__ import annotations

import json

import httpx

from fireside.engine.devices.announce import local_addresses
from fireside.engine.settings import Settings
from tests.helpers.waiting import free_port

WAIT_MS = 20_000


def _share(app, qtbot, host: str = "127.0.0.1"):
    devices = app.window.pages["Server"].devices
    app.ctx.prefs.set("sharing", {"host": host, "port": 0, "announce": False})
    with qtbot.wait_signal(app.ctx.bridge.devices.sharing_started, timeout=WAIT_MS) as started:
        devices.sharing.share.click()
    return started.args[0]


def _unshare(app, qtbot):
    with qtbot.wait_signal(app.ctx.bridge.devices.sharing_stopped, timeout=WAIT_MS):
        app.window.pages["Server"].devices.sharing.share.click()


def test_sharing_on_every_interface_shows_an_address_another_device_can_use(qtbot, app):
    page = app.window.pages["Server"]
    assert "Sharing" not in page.state.text()
    device = _share(app, qtbot, host="0.0.0.0")
    try:
        host = device.url.split("://", 1)[1].rsplit(":", 1)[0]
        assert "0.0.0.0" not in device.url and host in (local_addresses() or ["localhost"])
        for text in (page.state.text(), app.window.server_label.text(), page.devices.sharing.share_state.text()):
            assert device.url in text and "0.0.0.0" not in text
        assert "Sharing" in page.state.text() and "API server stopped" in page.state.text()
        assert "sharing with paired devices" in app.window.server_label.text()
    finally:
        _unshare(app, qtbot)
    assert "Sharing" not in page.state.text() and "sharing" not in app.window.server_label.text()


def test_the_request_log_keeps_logging_after_sharing_has_run(qtbot, app):
    page = app.window.pages["Server"]
    _share(app, qtbot)
    _unshare(app, qtbot)
    page.port.setValue(free_port())
    with qtbot.wait_signal(page.server.started, timeout=WAIT_MS):
        page.start_server()
    try:
        with qtbot.wait_signal(page.request_log.line_logged, timeout=WAIT_MS,
                               check_params_cb=lambda line: "/v1/models" in line):
            assert httpx.get(f"{page.url()}/v1/models", timeout=30).status_code == 200
        assert "/v1/models" in page.log.toPlainText()
    finally:
        page.stop_server(wait=True)


def test_sharing_left_on_comes_back_after_the_window_shows_and_says_so(qtbot, make_app, loaded_runtime):
    settings = Settings.from_env()
    settings.ensure_dirs()
    (settings.config_dir / "app.json").write_text(json.dumps(
        {"sharing": {"on": True, "host": "127.0.0.1", "port": 0, "announce": False}}))
    from fireside.app.main import Fireside

    fireside = Fireside(settings=settings, engine=loaded_runtime, tray=False)
    window = fireside.start()
    try:
        devices = fireside.ctx.bridge.devices
        assert not window.pages["Server"].devices.sharing.share.isChecked()  # nothing started while the window is built
        with qtbot.wait_signal(devices.sharing_started, timeout=WAIT_MS) as started:
            window.show()
        notice = window.notice
        qtbot.waitUntil(notice.isVisible, timeout=WAIT_MS)
        assert "as when Fireside last quit" in notice.text.text() and started.args[0].url in notice.text.text()
        assert notice.action.text() == "Stop sharing"
        with qtbot.wait_signal(devices.sharing_stopped, timeout=WAIT_MS):
            notice.action.click()
        assert fireside.ctx.prefs.get("sharing")["on"] is False
    finally:
        fireside.stop()
