"""Runs the real app through ``main()`` in its own process for the exit test: a long scripted session
(a chat with the real model, both exports, the load dialog with its hardware probe, Discover against the
hub in ``HF_ENDPOINT`` with one download, the server started and asked once, the remotes list), then
prints ``ready`` and waits for the test's SIGTERM. The exit code and stderr are the test's evidence."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDialog


def _refs() -> str:
    """References to True and None: a binding that drops them (tests/app/test_binding.py) shows here."""
    return f"refs True={sys.getrefcount(True)} None={sys.getrefcount(None)}"


class Script:
    """The session, one step at a time; each step polls until it is done, then the next one starts."""

    def __init__(self, window, out: Path):
        self.window, self.out = window, out
        self.page = window.chat
        self.steps = [self.chat, self.export, self.load_dialog, self.discover, self.server, self.remotes, self.use]
        self.waiting = None
        self.timer = QTimer(window, interval=50)
        self.timer.timeout.connect(self.tick)
        self.timer.start()

    def tick(self) -> None:
        if self.waiting is not None and not self.waiting():
            return
        if not self.steps:
            self.timer.stop()
            print(f"step end {_refs()}", file=sys.stderr)
            print("ready", flush=True)
            return
        step = self.steps.pop(0)
        print(f"step {step.__name__} {_refs()}", file=sys.stderr, flush=True)
        self.waiting = step()

    def chat(self):
        ended = []
        self.page.reply_ended.connect(lambda _id, state: ended.append(state))
        self.page.settings_panel.max_tokens.setValue(12)
        self.page.composer.setPlainText("Say hello in five words.")
        self.page.send()
        return lambda: ended

    def export(self):
        conv = self.page.conv_id
        self.page.export(conv, "markdown", self.out / "chat.md")
        self.page.export(conv, "json", self.out / "chat.json")
        return lambda: (self.out / "chat.md").exists() and (self.out / "chat.json").exists()

    def load_dialog(self):
        bar = self.page.model_bar
        bar._on_settings_clicked()
        dialog = bar.findChild(QDialog)

        def inspected():
            if dialog.info is None and "Cannot" not in dialog.estimate.text():
                return False
            dialog.reject()
            return True
        return inspected

    def discover(self):
        self.window.show_page("Discover")
        page = self.window.pages["Discover"]
        page.query.setText("smol")
        page.search()
        added = []
        page.downloads.model_added.connect(lambda job: added.append(job))
        state = {"opened": False, "started": False}

        def done():
            if not state["opened"] and page.results.rowCount():
                state["opened"] = True
                page.results_view.selectRow(0)
            if state["opened"] and not state["started"] and page.files.rowCount():
                state["started"] = True
                page.files_view.selectRow(0)  # the smallest file
                page.download.click()
            return bool(added)
        return done

    def server(self):
        self.window.show_page("Server")
        page = self.window.pages["Server"]
        page.port.setValue(int(os.environ.get("EXIT_DRIVER_PORT", "0")) or page.port.value())
        page.start_server()
        asked = []

        def done():
            if page.running() and not asked:
                with urllib.request.urlopen(page.url() + "/v1/models", timeout=10) as r:
                    asked.append(r.status)
            return bool(asked)
        return done

    def remotes(self):
        self.window.show_page("Settings")
        return None

    def use(self):
        """What an hour of use does to the Qt binding, in a few seconds: pages flipped, the chat redrawn,
        the bridge's signals emitted and background tasks finished, ``EXIT_DRIVER_ROUNDS`` times."""
        ctx, done = self.window.ctx, []
        for n in range(int(os.environ.get("EXIT_DRIVER_ROUNDS", "300"))):
            self.window.show_page(("Chat", "My Models", "Knowledge", "Server", "Discover", "Settings")[n % 6])
            self.page.open_conversation(self.page.conv_id)
            ctx.bridge.loaded_changed.emit()
            ctx.tasks.run_in_background(lambda: None, lambda _r, _e: done.append(1))
        self.window.show_page("Chat")
        return lambda: len(done) == int(os.environ.get("EXIT_DRIVER_ROUNDS", "300"))


def main() -> int:
    QApplication(sys.argv[:1])
    from fireside.app import main as app_main

    out = Path(os.environ["EXIT_DRIVER_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "app.json").parent.mkdir(parents=True, exist_ok=True)

    def begin():
        window = next(w for w in QApplication.topLevelWidgets() if w.objectName() == "" and hasattr(w, "pages"))
        window.ctx.prefs.put("load_options", "starter", {"context": 2048})
        window._exit_script = Script(window, out)

    QTimer.singleShot(0, begin)
    return app_main.main(sys.argv[:1])


if __name__ == "__main__":
    sys.exit(main())
