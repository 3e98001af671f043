"""A way out of the app itself (issue 45: no menu, Ctrl+Q did nothing, and no tray on many desktops):
File → Quit and Ctrl+Q, wherever the focus is, ask main to quit (which runs the shutdown sequence)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest


def test_ctrl_q_from_the_composer_and_file_quit_both_ask_to_quit(qtbot, app):
    window = app.window
    menus = {a.text().replace("&", ""): a.menu() for a in window.menuBar().actions()}
    quits = [a for a in menus["File"].actions() if a.text().replace("&", "").startswith("Quit")]
    assert len(quits) == 1 and "Ctrl+Q" in [k.toString() for k in quits[0].shortcuts()]

    composer = window.chat.composer
    composer.setFocus()
    qtbot.waitUntil(composer.hasFocus)
    with qtbot.wait_signal(window.quit_requested, timeout=5_000):
        QTest.keyClick(composer, Qt.Key_Q, Qt.ControlModifier)  # typing in a chat: still quits
    with qtbot.wait_signal(window.quit_requested, timeout=5_000):
        quits[0].trigger()
