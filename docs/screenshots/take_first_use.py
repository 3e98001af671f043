"""Take the screenshots of issue 45 (the app as a new user meets it):

- settings-wheel.png: Settings after real mouse-wheel turns over its combo boxes (xdotool, so X delivers real
  wheel events): the page scrolled and no setting changed (the documents' embedder still None);
- server-sharing.png: the Server page while this computer shares on every interface (0.0.0.0) and the API
  server runs: the address shown is this machine's network address, and the request log has its lines;
- knowledge-new.png: the Knowledge page right after making a collection: it is selected, its files shown.

    Xvfb :97 -screen 0 1280x800x24 & DISPLAY=:97 python docs/screenshots/take_first_use.py

The real app in a throwaway Fireside home; sharing is not announced by mDNS here (no packets leave the machine).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME)

from docs.screenshots.take import shot, start_app, wait  # noqa: E402
from fireside.engine.bench.targets import free_port  # noqa: E402


def wheel_over(widget, notches: int) -> None:
    """Real wheel turns (button 5: down) with the pointer over the middle of ``widget``."""
    where = widget.mapToGlobal(widget.rect().center())
    subprocess.run(["xdotool", "mousemove", str(where.x()), str(where.y())], check=True)
    wait(200)
    subprocess.run(["xdotool", "click", "--repeat", str(notches), "--delay", "120", "5"], check=True)
    wait(600)


def settings(window, fireside) -> None:
    window.show_page("Settings")
    page = window.pages["Settings"]
    box = page.documents
    wait(until=lambda: box.embedder.count() > 1, timeout_ms=30_000)
    scroll = page.layout().itemAt(0).widget()
    before = (page.theme.currentText(), page.default_kv.currentText(), page.default_context.value(),
              box.embedder.currentIndex())
    wheel_over(page.theme, 4)  # from the top: the page scrolls, the controls pass under the pointer
    wheel_over(box.embedder, 3)  # and over the embedder itself
    after = (page.theme.currentText(), page.default_kv.currentText(), page.default_context.value(),
             box.embedder.currentIndex())
    print("settings before", before, "after", after, "scrolled to", scroll.verticalScrollBar().value())
    assert before == after and scroll.verticalScrollBar().value() > 0, (before, after)
    shot(window, "settings-wheel")


def server(window, fireside) -> None:
    import httpx

    window.show_page("Server")
    page = window.pages["Server"]
    devices = fireside.ctx.bridge.devices
    fireside.ctx.prefs.set("sharing", {"host": "0.0.0.0", "port": free_port(), "announce": False})
    page.devices.share.setChecked(True)
    wait(until=lambda: devices.device is not None, timeout_ms=30_000)
    page.port.setValue(free_port())
    page.start_server()
    wait(until=page.running, timeout_ms=30_000)
    httpx.get(f"{page.url()}/v1/models", timeout=30)
    httpx.get(f"{page.url()}/api/tags", timeout=30)
    wait(until=lambda: "/api/tags" in page.log.toPlainText(), timeout_ms=10_000)
    page.tabs.setCurrentWidget(page.log)
    print("server:", page.state.text(), "|", window.server_label.text())
    shot(window, "server-sharing")
    page.stop_server(wait=True)
    page.devices.share.setChecked(False)
    wait(until=lambda: devices.device is None and page.devices.share.isEnabled(), timeout_ms=30_000)


def knowledge(window, fireside) -> None:
    page = window.pages["Knowledge"]
    window.show_page("Knowledge")
    manuals = HOME / "manuals"
    manuals.mkdir()
    (manuals / "fog-horn.md").write_text("# Fog horn\n\nOil the compressor every 200 hours of running.\n")
    (manuals / "lamp.md").write_text("# Lamp\n\nThe lens is polished every Tuesday.\n")
    changed = []
    page.collections_changed.connect(lambda: changed.append(1))
    page.create_from_files([manuals / "fog-horn.md", manuals / "lamp.md"], "Lighthouse manuals")
    wait(until=lambda: changed and page.selected() and page.files.topLevelItemCount() == 2, timeout_ms=60_000)
    wait(until=lambda: page.rows and page.rows[0].collection.status == "completed", timeout_ms=60_000)
    wait(1200)  # the files' states as the poll reads them
    shot(window, "knowledge-new")


def main() -> None:
    _app, fireside, window = start_app()
    wait(800)
    settings(window, fireside)
    server(window, fireside)
    knowledge(window, fireside)
    fireside.stop()


if __name__ == "__main__":
    main()
