"""What a new user saw go wrong on the Chat, My Models and Server pages (issue 45, item 5): the empty
chat kept offering "Start chatting with SmolLM2" with a model loaded; My Models said "never" for the
model in use; an error banner pushed every page down, moving buttons under the pointer; and "Copy
snippet" copied nothing on some tabs and confirmed nothing on any."""

from __future__ import annotations

from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QPlainTextEdit

from fireside.app.feedback import show_error


def test_the_empty_chat_offers_the_built_in_model_only_while_none_is_loaded(qtbot, app):
    page = app.window.chat
    page.new_chat()
    assert page.stack.currentWidget() is page.empty
    assert not page.start_button.isVisible()  # starter is loaded (the fixture's runtime)
    assert "starter is loaded" in page.ready.text()
    page.new_chat()  # and not back on the next New chat either
    assert not page.start_button.isVisible() and page.ready.isVisible()


def test_my_models_says_loaded_now_for_the_model_in_use(qtbot, app):
    app.window.show_page("My Models")
    models = app.window.pages["My Models"]
    table = models.table_model
    qtbot.waitUntil(lambda: any(m.id == "starter" for m in table.rows), timeout=15_000)
    row = next(i for i, m in enumerate(table.rows) if m.id == "starter")
    assert table.index(row, table.columnCount() - 1).data() == "loaded now"


def test_a_notice_moves_nothing_on_the_page_under_it(qtbot, app):
    window = app.window
    window.show_page("Server")
    button = window.pages["Server"].toggle
    before = button.mapTo(window, QPoint(0, 0))
    show_error("the hub did not answer")
    QApplication.sendPostedEvents()  # the layout requests a notice in the layout used to make
    QApplication.processEvents()
    assert window.notice.isVisible() and "did not answer" in window.notice.text.text()
    assert button.mapTo(window, QPoint(0, 0)) == before
    notice = window.notice.geometry()
    assert notice.width() > 300 and notice.top() < 60  # floating over the top of the page


def test_copy_copies_what_each_tab_shows_and_says_so(qtbot, app):
    app.window.show_page("Server")
    page = app.window.pages["Server"]
    clipboard = QGuiApplication.clipboard()
    for name, view in page.snippet_views.items():
        page.tabs.setCurrentWidget(view)
        assert page.copy_button.isVisible() and name in page.copy_button.text()
        clipboard.clear()
        page.copy_button.click()
        assert clipboard.text() == view.toPlainText() and page.url() in clipboard.text()
        assert page.copy_button.text() == "Copied ✓"
    page.tabs.setCurrentWidget(page.devices)
    assert not page.copy_button.isVisible()  # nothing there to copy
    page.tabs.setCurrentWidget(page.log)
    assert page.copy_button.text() == "Copy log" and isinstance(page.log, QPlainTextEdit)
