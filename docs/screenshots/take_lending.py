"""Take docs/screenshots/lending.png: Server → Your devices sharing and lending 4 GiB, under Xvfb.

    xvfb-run -a -s "-screen 0 1280x800x24" python docs/screenshots/take_lending.py

The real app in a throwaway Fireside home: "Lend up to 4 GiB" ticked beside the Share switch, then the
switch on (loopback, no mDNS announcement), so the state reads "Sharing ... lending up to 4 GiB".
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from take import shot, start_app, wait  # noqa: E402  (sets a throwaway FIRESIDE_HOME first)


def main() -> None:
    import keyring

    from tests.helpers.keyrings import MemoryKeyring

    keyring.set_keyring(MemoryKeyring())
    _app, fireside, window = start_app()
    fireside.ctx.prefs.set("sharing", {"host": "127.0.0.1", "port": 0, "name": "studio", "announce": False})
    window.show_page("Server")
    server = window.pages["Server"]
    server.tabs.setCurrentWidget(server.devices)
    bar = server.devices.sharing
    bar.lend.setChecked(True)
    bar.lend_gib.setValue(4)
    bar.share.click()
    wait(until=lambda: "lending up to 4 GiB" in bar.share_state.text(), timeout_ms=60_000)
    shot(window, "lending")
    fireside.stop()


if __name__ == "__main__":
    main()
