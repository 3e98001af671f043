"""The Knowledge page as a new user meets it (issue 45): a collection just made is selected, its files
shown and Rescan/Delete live; a collection can be renamed in the list; and a source found by keywords
alone says so in its popup, as the README promises (no embedder chosen)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QAbstractItemView

from fireside.app.chat.sources import SourceDialog

NOTES = "# Lamp\n\nThe lens is polished every Tuesday.\n"


def _make(qtbot, knowledge, tmp_path, name: str):
    path = tmp_path / f"{name}.md"
    path.write_text(NOTES)
    with qtbot.wait_signal(knowledge.collections_changed, timeout=15_000):
        knowledge.create_from_files([path], name)


def test_a_new_collection_is_selected_with_its_files_and_can_be_renamed_in_the_list(qtbot, app, tmp_path):
    knowledge = app.window.pages["Knowledge"]
    app.window.show_page("Knowledge")
    _make(qtbot, knowledge, tmp_path, "first")
    _make(qtbot, knowledge, tmp_path, "second")
    qtbot.waitUntil(lambda: knowledge.selected() is not None and knowledge._row(knowledge.selected())
                    and knowledge._row(knowledge.selected()).collection.name == "second", timeout=15_000)
    qtbot.waitUntil(lambda: knowledge.files.topLevelItemCount() == 1, timeout=15_000)
    assert knowledge.files.topLevelItem(0).text(0) == "second.md"
    assert knowledge.delete_button.isEnabled() and knowledge.rename_button.isEnabled()

    knowledge.rename_button.click()  # the name becomes editable in the list
    qtbot.waitUntil(lambda: knowledge.tree.state() == QAbstractItemView.EditingState, timeout=5_000)
    editor = knowledge.tree.focusWidget()
    editor.selectAll()
    QTest.keyClicks(editor, "Lighthouse manuals")
    with qtbot.wait_signal(knowledge.collections_changed, timeout=15_000):
        QTest.keyClick(editor, Qt.Key_Return)
    assert {c.name for c in app.ctx.bridge.embedder.collections().list()} == {"first", "Lighthouse manuals"}
    qtbot.waitUntil(lambda: [knowledge.tree.topLevelItem(i).text(0) for i in range(knowledge.tree.topLevelItemCount())]
                    == ["first", "Lighthouse manuals"], timeout=10_000)

def test_a_source_found_by_keywords_alone_says_so(qtbot, app, tmp_path):
    knowledge = app.window.pages["Knowledge"]
    _make(qtbot, knowledge, tmp_path, "lamp")
    qtbot.waitUntil(lambda: bool(knowledge.rows) and knowledge.rows[0].collection.status == "completed", timeout=15_000)
    [passage] = app.ctx.bridge.knowledge.search([knowledge.rows[0].collection.id], "lens polished", 3)
    assert passage.found_by == "bm25"  # no embedder chosen
    source = {"n": 1, "file": passage.filename, "page": passage.page, "page_end": passage.page,
              "heading": passage.heading, "text": passage.text, "mode": "retrieved", "found_by": passage.found_by}
    dialog = SourceDialog(source, "", passage.text, "")
    qtbot.addWidget(dialog)
    assert "found by keywords alone" in dialog.where.text()
    dialog = SourceDialog({**source, "found_by": "fused"}, "", passage.text, "")
    qtbot.addWidget(dialog)
    assert "found by keywords and by meaning" in dialog.where.text()
