"""How long the first window takes to paint, with sharing left on at the last quit and without.

    python bench/first_window.py [--runs 5]

Each run is a fresh process (imports included, as a user's start is) in a throwaway Fireside home whose
preferences say sharing was on (loopback, not announced) or off, and prints the median time from the
process's first line to the window's first paint. Sharing left on used to start its TLS listener while
the window was being built (4.8 s against 2.7 s, issue 45); it now starts 1.5 s after the window shows,
so the two should match. Offscreen unless a display is set.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

CHILD = r'''
import json, os, sys, tempfile, time
t0 = time.perf_counter()
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ["FIRESIDE_HOME"] = tempfile.mkdtemp(prefix="fireside-bench-window-")
from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QApplication
app = QApplication(sys.argv[:1])
from fireside.engine.settings import Settings
settings = Settings.from_env()
settings.ensure_dirs()
sharing = {"on": sys.argv[1] == "on", "host": "127.0.0.1", "port": 0, "announce": False}
(settings.config_dir / "app.json").write_text(json.dumps({"sharing": sharing}))
from fireside.app.main import Fireside
fireside = Fireside(tray=False)
window = fireside.start()
painted = []
class Spy(QObject):
    def eventFilter(self, obj, event):
        if event.type() == QEvent.Paint and not painted:
            painted.append(time.perf_counter())
            QTimer.singleShot(3000, app.quit)  # long enough for sharing to start (and be stopped cleanly)
        return False
spy = Spy()
window.installEventFilter(spy)
window.show()
app.exec()
fireside.stop()
print(painted[0] - t0)
'''


def first_paint(sharing: str) -> float:
    out = subprocess.run([sys.executable, "-c", CHILD, sharing], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.runs):
        for sharing in times:  # alternated: a busy moment of the machine falls on both
            times[sharing].append(first_paint(sharing))
    off, on = (statistics.median(times[k]) for k in ("off", "on"))
    print(f"first paint, sharing off: {off:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times['off'])})")
    print(f"first paint, sharing on:  {on:.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times['on'])})")
    print(f"on/off: {on / off:.2f}x  (goal: 1.0x; it was 1.8x)")


if __name__ == "__main__":
    main()
