"""SIGTERM (or Ctrl+C) quits through the shutdown sequence from the event loop, never from inside the
Python signal handler: Python runs a handler between any two bytecodes of the GUI thread, so a shutdown
run right there ran inside whatever that thread was doing. The exit test caught it hanging for good,
inside ``ThreadPoolExecutor.submit``, whose lock the shutdown's ``pool.shutdown()`` then waited for."""

from __future__ import annotations

import signal

from PySide6.QtCore import QTimer


def test_sigterm_shuts_down_from_the_event_loop(qapp, monkeypatch):
    from fireside.app import main as app_main

    inside, seen = [False], {}
    real_stop = app_main.Fireside.stop

    def stop(self):
        seen.setdefault("inside_handler_window", inside[0])
        real_stop(self)

    def busy_gui_code():
        inside[0] = True
        signal.raise_signal(signal.SIGTERM)  # Python runs the handler right here
        inside[0] = False

    monkeypatch.setattr(app_main.Fireside, "stop", stop)
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    QTimer.singleShot(300, busy_gui_code)
    try:
        code = app_main.main(["fireside"])
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert code == 0
    assert seen == {"inside_handler_window": False}, "the shutdown ran inside the signal handler"
