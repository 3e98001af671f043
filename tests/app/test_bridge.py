"""The bridge: background work reports back on the GUI thread, and engine signals emitted on worker
threads run their bound slots on the main thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, QThread, Slot

from fireside.app.bridge import EngineBridge
from fireside.app.bridge.tasks import Tasks
from tests.helpers.fakes import FakeEngine


class _Receiver(QObject):
    """Signals: none. Records which thread its slots run on."""

    def __init__(self):
        super().__init__()
        self.threads: list[QThread] = []
        self.texts: list[str] = []

    @Slot(int, str, str)
    def _on_bridge_reply_text(self, _reply_id: int, _kind: str, text: str) -> None:
        self.threads.append(QThread.currentThread())
        self.texts.append(text)


def test_cross_thread_signal_runs_the_slot_on_the_main_thread(qtbot, qapp):
    tasks = Tasks()
    runtime = FakeEngine()
    bridge = EngineBridge(runtime, tasks)
    receiver = _Receiver()
    bridge.reply_text.connect(receiver._on_bridge_reply_text)
    with qtbot.waitSignal(bridge.reply_finished, timeout=5000) as done:
        bridge.chat(7, "m", None)
    assert runtime.worker_threads[0] is not threading.main_thread()
    assert "".join(receiver.texts) == "one two three"
    assert receiver.threads and all(t is qapp.thread() for t in receiver.threads)
    assert done.args[0] == 7 and done.args[1].usage.completion_tokens == 3
    tasks.close()


def test_run_in_background_delivers_on_the_main_thread(qtbot, qapp):
    tasks = Tasks()
    seen = []

    def work():
        return threading.current_thread().name

    tasks.run_in_background(work, lambda result, error: seen.append((result, error, threading.current_thread())))
    qtbot.waitUntil(lambda: bool(seen))
    name, error, thread = seen[0]
    assert name.startswith("fireside-task") and error is None and thread is threading.main_thread()
    tasks.run_in_background(lambda: 1 / 0, lambda result, error: seen.append((result, error, None)))
    qtbot.waitUntil(lambda: len(seen) == 2)
    assert isinstance(seen[1][1], ZeroDivisionError)
    tasks.close()


def test_a_failing_callback_is_shown_not_raised(qtbot):
    from fireside.app import feedback

    tasks = Tasks()
    tasks.run_on_main(lambda: (_ for _ in ()).throw(ValueError("bad input")))
    qtbot.waitUntil(lambda: feedback.history and "bad input" in feedback.history[-1])
    tasks.close()




def test_delete_unloads_then_removes_in_one_task_off_the_gui_thread(qtbot):
    tasks = Tasks()
    engine = FakeEngine()
    bridge = EngineBridge(engine, tasks)
    done = []
    with qtbot.waitSignal(bridge.loaded_changed, timeout=5000):
        bridge.delete_model("m", lambda result, error: done.append((result, error)))
    qtbot.waitUntil(lambda: bool(done))
    assert done == [("m", None)]
    (first, _, t1), (second, _, t2) = engine.calls
    assert (first, second) == ("unload", "remove"), "no runner may hold a file being deleted"
    assert t1 is t2 and t1 is not threading.main_thread()
    tasks.close()
