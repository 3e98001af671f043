"""Take docs/screenshots/devices.png (Server → Your devices, sharing, with a paired device each way) and
picker-device.png (the chat's model picker open on a paired device's models).

    xvfb-run -a -s "-screen 0 1280x800x24" python docs/screenshots/take_devices.py

The real app ("studio") in a throwaway Fireside home shares on loopback; a second Fireside ("desk", in
this process, with its own home and key store) shares and announces itself by mDNS; the app finds
desk on the network and pairs with the code desk shows, through the Pair dialog; a third device
("laptop") pairs with the code the app shows. No keyring daemon runs here, so the keys live in the
tests' in-memory keyring. The picker's list is a popup window, so that picture is taken of the screen.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME / "studio")

import keyring  # noqa: E402
from PySide6.QtGui import QGuiApplication  # noqa: E402

from docs.screenshots.take import shot, start_app, wait  # noqa: E402
from tests.helpers.keyrings import DictKeys, MemoryKeyring  # noqa: E402


def other_device(name: str):
    from fireside.engine.devices import DeviceBook, Identity
    from fireside.engine.settings import Settings

    settings = Settings.from_env({"FIRESIDE_HOME": str(HOME / name)})
    settings.ensure_dirs()
    return settings, DeviceBook(settings, keys=DictKeys()), Identity.load_or_create(settings, name)


def start_desk():
    from fireside.engine.facade import Engine
    from fireside.engine.remote import RemoteEngine
    from fireside.engine.server.shared import Share, Sharing

    settings, book, _ = other_device("desk")
    engine = Engine(settings, remotes=RemoteEngine(settings, devices=book))
    sharing = Sharing(settings, Share("127.0.0.1", 0, "desk"), engine)
    sharing.start()
    return sharing, engine


def main() -> None:
    keyring.set_keyring(MemoryKeyring())
    from fireside.engine.devices.pairing import pair

    desk, desk_engine = start_desk()
    _app, fireside, window = start_app()
    fireside.ctx.prefs.set("sharing", {"host": "127.0.0.1", "port": 0, "name": "studio"})
    window.show_page("Server")
    server = window.pages["Server"]
    panel = server.devices
    server.tabs.setCurrentWidget(panel)
    panel.sharing.share.click()
    wait(until=lambda: fireside.ctx.bridge.devices.shared, timeout_ms=20_000)
    wait(until=lambda: any(f.name == "desk" for f in panel.found), timeout_ms=20_000)

    code, _ = desk.desk.open_code()
    panel.network.setCurrentRow(next(i for i, f in enumerate(panel.found) if f.name == "desk"))
    panel.pair_button.click()
    wait(until=lambda: panel.pair_dialog is not None and panel.pair_dialog.isVisible(), timeout_ms=5_000)
    panel.pair_dialog.field.setText(code)
    panel.pair_dialog.accept()
    wait(until=lambda: "desk/starter" in window.chat.model_bar.on_device, timeout_ms=30_000)

    panel.sharing.code_button.click()
    shown = panel.sharing.code.text().split("<b>")[1].split("</b>")[0]
    port = int(fireside.ctx.bridge.devices.sharing.url.rsplit(":", 1)[1])
    _, book, identity = other_device("laptop")
    pair(book, identity, "laptop", "studio", "127.0.0.1", port, shown)
    panel.refresh()
    wait(until=lambda: panel.paired.count() == 2 and not panel.progress.isVisible(), timeout_ms=20_000)
    panel.sharing.code_button.click()  # a fresh code on screen (the one laptop used is spent)
    panel.paired.setCurrentRow(0)
    shot(window, "devices")

    picker(window)
    fireside.stop()
    desk.stop()
    desk_engine.close()


def picker(window) -> None:
    """The chat's picker open on desk's model; its list is a popup, so this is a picture of the screen."""
    window.show_page("Chat")
    bar = window.chat.model_bar
    bar.set_model("desk/starter")
    wait(300)
    bar.combo.showPopup()
    wait(600)
    screen = QGuiApplication.primaryScreen().grabWindow(0)
    top_left = window.mapToGlobal(window.rect().topLeft())
    screen.copy(top_left.x(), top_left.y(), window.width(), window.height()).save(str(OUT / "picker-device.png"))
    print("saved", OUT / "picker-device.png")
    bar.combo.hidePopup()


if __name__ == "__main__":
    main()
