"""The GUI thread's worst stall while the starter model loads and a reply streams, in the real app.

    python bench/gui.py [--runs 3] [--tokens 96]

Starts the app the way ``fireside-app`` does (offscreen unless a display is set, in a throwaway
Fireside home), presses Send, and ticks a 5 ms QTimer until the reply ends: the longest gap between
ticks is how long the window was frozen. Each run unloads the model first, so it covers a load too.
Goal: under 50 ms. (tests/app/test_responsiveness.py checks a looser bound inside pytest, whose
Qt-message capture adds its own pauses.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["FIRESIDE_HOME"] = tempfile.mkdtemp(prefix="fireside-bench-gui-")

from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def one_run(qapp: QApplication, app, tokens: int, prompt: str) -> tuple[float, int]:
    page = app.window.chat
    page.settings_panel.max_tokens.setValue(tokens)
    page.composer.setPlainText(prompt)
    last, worst, ticks = [time.perf_counter()], [0.0], [0]

    def tick() -> None:
        now = time.perf_counter()
        worst[0] = max(worst[0], now - last[0])
        last[0] = now
        ticks[0] += 1

    timer = QTimer(interval=5)
    timer.timeout.connect(tick)
    page.reply_ended.connect(qapp.quit)
    deadline = QTimer(singleShot=True, interval=120_000)
    deadline.timeout.connect(qapp.quit)

    def go() -> None:
        last[0] = time.perf_counter()
        timer.start()
        deadline.start()
        page.send_button.click()

    QTimer.singleShot(300, go)  # let the window settle first
    qapp.exec()
    timer.stop()
    page.reply_ended.disconnect(qapp.quit)
    return worst[0], ticks[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=96)
    args = ap.parse_args()
    qapp = QApplication([])
    from fireside.app.main import Fireside

    app = Fireside(tray=False)
    app.start().show()
    stalls = []
    try:
        for i in range(args.runs):
            app.ctx.engine.unload("starter")
            worst, ticks = one_run(qapp, app, args.tokens, f"Tell me about the sea, part {i + 1}.")
            stalls.append(worst)
            print(f"run {i + 1}: worst stall {worst * 1000:.1f} ms over {ticks} ticks (load + reply)")
    finally:
        app.stop()
    print(f"median worst stall {statistics.median(stalls) * 1000:.1f} ms, max {max(stalls) * 1000:.1f} ms "
          f"(goal: under 50 ms)")


if __name__ == "__main__":
    main()
