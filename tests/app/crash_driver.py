"""Runs the real app in its own process for the SIGKILL test: starts it the way ``main`` does, sends one
message, and prints a JSON line each time reply text is shown, so the test knows what the user saw, or
one ``{"error": ...}`` line when the load or the reply fails, so the test fails at once instead of waiting."""

from __future__ import annotations

import json
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication


def main() -> None:
    app = QApplication(sys.argv[:1])
    from fireside.app import feedback
    from fireside.app.main import Fireside

    fireside = Fireside(tray=False)
    window = fireside.start()
    window.show()
    page = window.chat
    ctx = fireside.ctx
    ctx.prefs.put("load_options", "starter", {"context": 2048})

    def on_shown(reply_id: int, text: str) -> None:
        runners = [m.pid for m in ctx.engine.loaded()]
        print(json.dumps({"reply": reply_id, "text": text, "runners": runners}), flush=True)

    def go() -> None:
        page.settings_panel.max_tokens.setValue(300)
        page.settings_panel.temperature.setValue(0.0)  # greedy: the long story every time (sampled, the
        # model now and then answered in one sentence, which ended before the kill was due)
        page.composer.setPlainText(sys.argv[1])
        page.send()

    def on_error(text: str) -> None:  # a failed load or reply: say so at once, so the test fails fast
        if any(text in m.warnings for m in ctx.engine.loaded()):
            return  # what a load changed to succeed (a healed load on an AMX CPU): a note, not a failure
        print(json.dumps({"error": text}), flush=True)

    feedback.add_sink(on_error)
    page.reply_shown.connect(on_shown)
    QTimer.singleShot(0, go)
    app.exec()


if __name__ == "__main__":
    main()
