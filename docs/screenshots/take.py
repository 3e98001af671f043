"""Take a screenshot of every page of the real app at 1280x800, under Xvfb.

    xvfb-run -s "-screen 0 1280x800x24" python docs/screenshots/take.py

The app starts the way ``main`` does, in a throwaway Fireside home, with the real SmolLM2 starter
model; the chat shows a real reply. Discover talks to the local fake hub from ``tests/helpers`` (no
network here), so its repo and file list are that fixture's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
os.environ["FIRESIDE_HOME"] = tempfile.mkdtemp(prefix="fireside-shots-")

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from fireside.engine.bench.targets import free_port  # noqa: E402


def wait(ms: int = 0, until=None, timeout_ms: int = 120_000) -> None:
    loop = QEventLoop()
    waited = 0
    while True:
        QTimer.singleShot(50, loop.quit)
        loop.exec()
        waited += 50
        if (until is None and waited >= ms) or (until is not None and until()) or waited > timeout_ms:
            return


def shot(window, name: str) -> None:
    wait(300)
    window.grab().save(str(OUT / f"{name}.png"))
    print("saved", OUT / f"{name}.png")


def chat(fireside, window, prompt: str, tokens: int) -> None:
    page = window.chat
    ended, shown = [], []
    page.reply_ended.connect(lambda *a: ended.append(a))
    page.reply_shown.connect(lambda *a: shown.append(a))
    page.settings_panel.max_tokens.setValue(tokens)
    page.settings_panel.fixed_seed.setChecked(True)
    page.settings_panel.seed.setValue(7)
    page.composer.setPlainText(prompt)
    page.send()
    wait(until=lambda: len(shown) >= 12 or ended, timeout_ms=600_000)
    if not ended:
        shot(window, "chat-streaming")
    wait(until=lambda: ended, timeout_ms=600_000)


def start_app():
    """A ``QApplication`` and the app started the way ``main`` does, its window shown at 1280x800:
    ``(app, fireside, window)`` (keep ``app``: the window lives as long as it does)."""
    app = QApplication(sys.argv[:1])
    app.setApplicationName("Fireside")
    from fireside.app.main import Fireside

    fireside = Fireside(tray=False)
    window = fireside.start()
    window.resize(1280, 800)
    window.show()
    return app, fireside, window


def main() -> None:
    _app, fireside, window = start_app()
    wait(500)
    fireside.ctx.prefs.put("load_options", "starter", {"context": 4096})
    shot(window, "first-run")
    fireside.ctx.store.create_conversation("Plan a weekend in Lisbon", "starter")
    fireside.ctx.store.create_conversation("Explain KV caches", "starter")
    window.chat.new_chat()
    chat(fireside, window, "Write a Python function that reverses a string, with a short explanation.", 160)
    shot(window, "chat")
    discover(fireside, window)
    window.show_page("My Models")
    window.pages["My Models"].refresh()
    wait(1500)
    shot(window, "models")
    server = window.pages["Server"]
    window.show_page("Server")
    server.port.setValue(free_port())
    server.start_server()
    wait(until=server.running, timeout_ms=20_000)
    import httpx

    httpx.get(f"{server.url()}/v1/models", timeout=10)
    wait(until=lambda: "/v1/models" in server.log.toPlainText(), timeout_ms=5_000)
    server.tabs.setCurrentIndex(2)
    shot(window, "server")
    server.stop_server(wait=True)
    window.show_page("Settings")
    wait(until=lambda: "Backends" in window.pages["Settings"].hardware.text(), timeout_ms=10_000)
    shot(window, "settings")
    window.pages["Settings"].theme.setCurrentText("Dark")
    window.show_page("Chat")
    shot(window, "chat-dark")
    load_dialog(fireside, window)
    fireside.stop()


def discover(fireside, window) -> None:
    from tests.helpers.hubfixtures import make_hub, run_fakehub

    hub_gen = run_fakehub(Path(tempfile.mkdtemp()))
    fake = next(hub_gen)
    settings = replace(fireside.ctx.settings, hf_endpoint=fake.url)
    fireside.ctx.extras["hub_factory"] = lambda: make_hub(settings)
    page = window.pages["Discover"]
    window.show_page("Discover")
    page.query.setText("smollm2")
    page.search()
    wait(until=lambda: page.results.rowCount() > 0)
    page.results_view.selectRow(0)
    wait(until=lambda: page.files.rowCount() > 0 and len(page.fits) == page.files.rowCount())
    page.files_view.selectRow(0)
    page.download.click()
    wait(until=lambda: any(j.state == "done" for j in page.downloads.jobs.values()), timeout_ms=30_000)
    shot(window, "discover")


def load_dialog(fireside, window) -> None:
    from fireside.app.windows.load_dialog import LoadDialog

    dialog = LoadDialog(fireside.ctx, "starter", window)
    dialog.auto.setChecked(False)
    dialog.show()
    wait(until=lambda: dialog.info is not None, timeout_ms=10_000)
    dialog.layers.setValue(0)
    wait(300)
    dialog.grab().save(str(OUT / "load-dialog.png"))
    print("saved", OUT / "load-dialog.png")
    dialog.close()


if __name__ == "__main__":
    main()
