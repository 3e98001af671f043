"""The GUI thread stays responsive while a model loads and a reply streams: a 5 ms timer measures the
event loop's worst stall. The goal is under 50 ms; the bound asserted allows for a busy two-core
machine (the runner competes with the GUI for the same cores), and the figure is printed."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QObject, QTimer, Slot

from tests.helpers.driving import SMALL

pytestmark = pytest.mark.model
STALL_BOUND_S = 0.25


class StallMeter(QObject):
    """Signals: none. Ticks every 5 ms and keeps the longest gap between ticks."""

    def __init__(self):
        super().__init__()
        self.worst = 0.0
        self.ticks = 0
        self._last = time.perf_counter()
        self.timer = QTimer(self, interval=5)
        self.timer.timeout.connect(self._on_timer_timeout)
        self.timer.start()

    @Slot()
    def _on_timer_timeout(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self._last)
        self._last = now
        self.ticks += 1


def test_event_loop_never_stalls_while_loading_and_generating(qtbot, make_app, shared_runtime):
    shared_runtime.unload("starter")
    app = make_app(shared_runtime)
    app.ctx.prefs.put("load_options", "starter", {"context": SMALL.context})
    page = app.window.chat
    page.settings_panel.max_tokens.setValue(48)
    page.composer.setPlainText("Tell me about the sea.")
    meter = StallMeter()
    with qtbot.waitSignal(page.reply_ended, timeout=120_000):
        page.send_button.click()  # loads the model (with progress), then streams the reply
    meter.timer.stop()
    print(f"\nworst event-loop stall while loading and generating: {meter.worst * 1000:.1f} ms "
          f"over {meter.ticks} ticks")
    assert meter.ticks > 50
    assert meter.worst < STALL_BOUND_S
