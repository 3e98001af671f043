"""The Knowledge page and knowledge in chats, with real widgets, the real collections (SQLite, the readers,
the indexing worker) and the real SmolLM2: a watched folder is listed with its progress and follows a new,
a changed and a deleted file on Rescan; a chat that ticks the collection gets a reply whose sources name the
collection's file (listed under the reply and saved with it); a restart keeps the collection and the chat's
choice; a file the uploads refuse is named, and the others still make the collection."""

from __future__ import annotations

import os

import pytest

from tests.helpers.driving import send

pytestmark = pytest.mark.model

FEES = "# Harbour fees\n\nThe harbour pilot fee is forty-two crowns for each vessel.\n"


def _ready(qtbot, knowledge, name: str, indexed: str) -> None:
    """Wait until the page lists ``name`` as ready with ``indexed`` (``N of M``) files."""
    def shown():
        knowledge.refresh()
        items = [knowledge.tree.topLevelItem(i) for i in range(knowledge.tree.topLevelItemCount())]
        return any(i.text(0) == name and i.text(2) == indexed and i.text(3).startswith("ready") for i in items)
    qtbot.waitUntil(shown, timeout=30_000)


def _files(knowledge) -> dict[str, str]:
    """The selected collection's files as the page lists them: name -> state."""
    rows = [knowledge.files.topLevelItem(i) for i in range(knowledge.files.topLevelItemCount())]
    return {r.text(0): r.text(1) for r in rows}


def _watch(qtbot, knowledge, folder):
    with qtbot.waitSignal(knowledge.collections_changed, timeout=30_000):
        knowledge.watch_folder(folder)


def test_a_watched_folder_is_listed_and_follows_its_files_on_rescan(qtbot, app, tmp_path):
    folder = tmp_path / "harbour"
    folder.mkdir()
    (folder / "fees.md").write_text(FEES)
    (folder / "tides.txt").write_text("High tide is at six.\n")
    (folder / "logo.txt").write_bytes(bytes(range(256)) * 64)  # binary data under a text name
    knowledge = app.window.pages["Knowledge"]
    app.window.show_page("Knowledge")
    _watch(qtbot, knowledge, folder)
    _ready(qtbot, knowledge, "harbour", "2 of 2")
    item = knowledge.tree.topLevelItem(0)
    assert item.text(1) == f"{folder.resolve()} (watched)"
    assert item.text(3) == "ready · 1 not indexed"
    with qtbot.waitSignal(knowledge.files_listed, timeout=10_000):
        knowledge.tree.setCurrentItem(item)
    collection_id = knowledge.selected()
    assert _files(knowledge) == {"fees.md": "indexed", "logo.txt": "refused: logo.txt holds binary data, not "
                                 "text (is it really a .txt file?)", "tides.txt": "indexed"}
    assert knowledge.rescan_button.isEnabled() and knowledge.delete_button.isEnabled()
    with qtbot.waitSignal(knowledge.listed, timeout=10_000):  # the poll's refresh keeps the files shown
        knowledge.refresh()
    assert knowledge.selected() == collection_id and len(_files(knowledge)) == 3

    (folder / "bell.md").write_text("The bell rings at noon.\n")
    (folder / "fees.md").write_text(FEES.replace("forty-two", "fifty"))
    os.utime(folder / "fees.md", ns=(1, 1))
    (folder / "tides.txt").unlink()
    knowledge.rescan_button.click()
    qtbot.waitUntil(lambda: knowledge.details.text().startswith("Rescanned: 1 new, 1 changed, 1 removed.\n"),
                    timeout=30_000)
    _ready(qtbot, knowledge, "harbour", "2 of 2")
    qtbot.waitUntil(lambda: set(_files(knowledge)) == {"bell.md", "fees.md", "logo.txt"}, timeout=10_000)
    found = app.ctx.bridge.embedder.collections().search([collection_id], "pilot fee crowns", k=1)
    assert found[0].filename == "fees.md" and "fifty crowns" in found[0].text

    with qtbot.waitSignal(knowledge.collections_changed, timeout=30_000):
        knowledge.delete(knowledge.selected())
    qtbot.waitUntil(lambda: knowledge.tree.topLevelItemCount() == 0 and knowledge.details.text() == "No collections yet.")


def test_files_the_uploads_refuse_are_named_and_the_rest_still_make_the_collection(qtbot, app, tmp_path):
    (tmp_path / "ok.md").write_text(FEES)
    (tmp_path / "fake.txt").write_bytes(bytes(range(256)) * 64)
    knowledge = app.window.pages["Knowledge"]
    shown = []
    app.window.notice.show_message = shown.append
    with qtbot.waitSignal(knowledge.collections_changed, timeout=30_000):
        knowledge.create_from_files([tmp_path / "ok.md", tmp_path / "fake.txt"], "Mixed")
    _ready(qtbot, knowledge, "Mixed", "1 of 1")
    assert knowledge.tree.topLevelItem(0).text(1) == "chosen files"
    assert any("fake.txt" in text and "binary" in text.lower() for text in shown), shown


def test_a_chat_that_ticks_a_collection_is_answered_from_it_and_a_restart_keeps_both(qtbot, make_app,
                                                                                       loaded_runtime, tmp_path):
    folder = tmp_path / "harbour"
    folder.mkdir()
    (folder / "fees.md").write_text(FEES)
    (folder / "weather.md").write_text("# Weather\n\nFog rolls in most mornings in November.\n")
    first = make_app(loaded_runtime)
    knowledge, page = first.window.pages["Knowledge"], first.window.chat
    _watch(qtbot, knowledge, folder)
    _ready(qtbot, knowledge, "harbour", "2 of 2")
    collection_id = knowledge.rows[0].collection.id
    qtbot.waitUntil(lambda: collection_id in page.settings_panel.collection_boxes, timeout=10_000)
    page.settings_panel.collection_boxes[collection_id].setChecked(True)

    reply_id, state = send(qtbot, page, "What is the harbour pilot fee?", max_tokens=8)
    assert state == "complete"
    reply = first.ctx.store.message(reply_id)
    items = reply.sources["items"]
    assert items[0]["file"] == "fees.md" and items[0]["collection"] == "harbour"
    assert "forty-two crowns" in items[0]["text"] and items[0]["mode"] == "retrieved"
    assert reply.stats["prompt_tokens"] > 40  # the passage went into the prompt
    view = page.transcript.view(reply_id)
    view.sources.toggle.click()
    assert view.sources.isVisible() and "[1] fees.md in harbour · Harbour fees" in view.sources.list.text()
    with qtbot.waitSignal(page.source_shown, timeout=10_000) as opened:
        view.sources.list.linkActivated.emit("source:1")
    assert "forty-two crowns" in opened.args[0].text.toPlainText()  # read from the collection's copy
    opened.args[0].close()
    conv_id = page.conv_id
    md = tmp_path / "export" / "chat.md"
    page.export(conv_id, "markdown", md)
    qtbot.waitUntil(md.exists, timeout=10_000)
    assert "[1] fees.md in harbour · Harbour fees" in md.read_text()
    assert first.ctx.store.conversation(conv_id).tools["collections"] == [collection_id]
    first.stop()

    again = make_app(loaded_runtime)
    page = again.window.chat
    assert page.conv_id == conv_id
    qtbot.waitUntil(lambda: collection_id in page.settings_panel.collection_boxes, timeout=10_000)
    assert page.settings_panel.collection_boxes[collection_id].isChecked()
    _ready(qtbot, again.window.pages["Knowledge"], "harbour", "2 of 2")
    assert page.transcript.view(reply_id).sources.items == items
