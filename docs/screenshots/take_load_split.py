"""Take docs/screenshots/load-split.png: the load dialog placing the starter's layers on a paired device's
lent memory, under Xvfb.

    xvfb-run -a -s "-screen 0 1280x800x24" python docs/screenshots/take_load_split.py

The real app ("studio") in a throwaway Fireside home; a second Fireside ("desk", in this process, its own
home and key store) shares on loopback and lends 2 GiB (``Share.lend_gib``); the app pairs with it with
the code desk shows. The dialog is in manual mode with 16 layers and desk checked, so the planner's
estimate shows the split: desk's lent memory and this machine's RAM.
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

from docs.screenshots.take import start_app, wait  # noqa: E402
from tests.helpers.keyrings import DictKeys, MemoryKeyring  # noqa: E402


def start_desk():
    from fireside.engine.devices import DeviceBook
    from fireside.engine.facade import Engine
    from fireside.engine.remote import RemoteEngine
    from fireside.engine.server.shared import Share, Sharing
    from fireside.engine.settings import Settings

    settings = Settings.from_env({"FIRESIDE_HOME": str(HOME / "desk")})
    settings.ensure_dirs()
    book = DeviceBook(settings, keys=DictKeys())
    engine = Engine(settings, remotes=RemoteEngine(settings, devices=book))
    sharing = Sharing(settings, Share("127.0.0.1", 0, "desk", announce=False, lend_gib=2), engine)
    sharing.start()
    return sharing, engine


def main() -> None:
    keyring.set_keyring(MemoryKeyring())
    from fireside.engine.devices import DeviceBook, Identity
    from fireside.engine.devices.pairing import pair

    desk, desk_engine = start_desk()
    _app, fireside, window = start_app()
    settings = fireside.ctx.settings
    port = int(desk.url.rsplit(":", 1)[1])
    code, _ = desk.desk.open_code()
    pair(DeviceBook(settings), Identity.load_or_create(settings, "studio"), "studio", "desk", "127.0.0.1", port, code)

    from fireside.app.windows.load_dialog import LoadDialog

    dialog = LoadDialog(fireside.ctx, "starter", window)
    dialog.auto.setChecked(False)
    dialog.show()
    wait(until=lambda: dialog.info is not None and "desk" in dialog.machine_boxes, timeout_ms=20_000)
    dialog.layers.setValue(16)
    dialog.context.setValue(4096)
    dialog.parallel.setValue(1)
    dialog.machine_boxes["desk"].setChecked(True)
    wait(until=lambda: "desk (lent)" in dialog.estimate.text(), timeout_ms=30_000)
    wait(300)
    dialog.grab().save(str(OUT / "load-split.png"))
    print("saved", OUT / "load-split.png", "|", dialog.estimate.text())
    dialog.close()
    fireside.stop()
    desk.stop()
    desk_engine.close()


if __name__ == "__main__":
    main()
