"""The Qt binding keeps Python's reference counts: emitting a signal and calling a Qt method that returns
nothing must not use up a reference to ``True`` or ``None``.

PySide6 6.12.0 on CPython before 3.12 does (it hands back ``True`` and ``None`` without a new reference,
which only immortal objects, from 3.12 on, survive). Each ``emit`` costs ``True`` a reference and each
void call costs ``None`` one, so a long session drains them and the app dies at exit with "Fatal Python
error: bool_dealloc" while garbage-collecting. pyproject.toml keeps that release out; this test fails
on any binding that brings the bug back."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel

CALLS = 5000


class _Emitter(QObject):
    fired = Signal(str, float)

    @Slot(str, float)
    def _on_fired(self, _name: str, _value: float) -> None:
        pass


def test_emit_keeps_true_alive(qtbot):
    emitter = _Emitter()
    emitter.fired.connect(emitter._on_fired)
    before = sys.getrefcount(True)
    for _ in range(CALLS):
        emitter.fired.emit("progress", 0.5)
    assert sys.getrefcount(True) > before - CALLS // 10, "each emit used up a reference to True"


def test_void_qt_calls_keep_none_alive(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    before = sys.getrefcount(None)
    for _ in range(CALLS):
        label.setText("tok/s")
    assert sys.getrefcount(None) > before - CALLS // 10, "each Qt call that returns nothing used up a reference to None"
