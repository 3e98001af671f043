"""Settings → Documents: the embedders in the library are offered first, choosing one is kept (the engine's
choice, so ``fireside serve`` agrees) and the app's API server embeds its vector stores with it; choosing
None goes back to keywords alone, and the group says which it is."""

from __future__ import annotations

import httpx
from PySide6.QtCore import Qt

from fireside.app.windows.documents_settings import NONE_LABEL
from fireside.engine.documents.embedding import chosen_embedder
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.bert_model import CLS, tiny_bert
from tests.helpers.waiting import free_port


def _pick(qtbot, box, label_start: str) -> None:
    index = next(i for i in range(box.embedder.count()) if box.embedder.itemText(i).startswith(label_start))
    box.embedder.setCurrentIndex(index)
    box.embedder.activated.emit(index)
    assert box.confirm.isVisible()  # a change is asked first
    qtbot.mouseClick(box.apply_button, Qt.LeftButton)


def test_choosing_an_embedder_is_kept_and_embeds_the_servers_vector_stores(qtbot, make_app):
    settings = Settings.from_env()
    settings.ensure_dirs()
    tiny_bert(settings.models_dir, CLS, name="tiny-bert")
    runtime = Runtime(settings, idle_ttl_s=0)
    try:
        app = make_app(runtime, settings)
        window = app.window
        window.show_page("Settings")
        box = window.pages["Settings"].documents
        box.refresh()
        qtbot.waitUntil(lambda: box.embedder.findData("tiny-bert") > 0, timeout=10_000)
        assert box.embedder.itemText(0) == NONE_LABEL and "keywords alone" in box.state.text()
        assert box.embedder.itemText(1) == "tiny-bert  · embedder"  # the embedder first, the chat model after
        assert any("starter  · chat model" in box.embedder.itemText(i) for i in range(box.embedder.count()))

        _pick(qtbot, box, "tiny-bert")
        qtbot.waitUntil(lambda: "embedded by tiny-bert" in box.state.text(), timeout=10_000)
        assert chosen_embedder(Settings.from_env()) == "tiny-bert"

        page = window.pages["Server"]
        page.port.setValue(free_port())
        page.start_server()
        qtbot.waitUntil(page.running, timeout=15_000)
        base = page.url()
        uploaded = httpx.post(f"{base}/v1/files", files={"file": ("lamp.md", b"# Lamp\n\nThe lens is polished.\n")},
                              data={"purpose": "assistants"}, timeout=30).json()
        store = httpx.post(f"{base}/v1/vector_stores", json={"name": "notes", "file_ids": [uploaded["id"]]},
                           timeout=30).json()
        collections = app.ctx.bridge.embedder.collections()
        qtbot.waitUntil(lambda: collections.get(store["id"]).status == "completed", timeout=30_000)
        assert collections._index(store["id"]).search("lens").mode == "fused"  # vectors from tiny-bert

        _pick(qtbot, box, NONE_LABEL)
        qtbot.waitUntil(lambda: "keywords alone" in box.state.text(), timeout=10_000)
        assert chosen_embedder(Settings.from_env()) is None
        assert collections._index(store["id"]).search("lens").mode == "bm25"
        page.stop_server(wait=True)
    finally:
        runtime.close()


def test_a_chats_long_document_is_searched_by_meaning_too_once_an_embedder_is_chosen(qtbot, make_app, tmp_path):
    from tests.app.test_chat_documents import drop, long_pdf
    from tests.helpers.driving import SMALL, send

    settings = Settings.from_env()
    settings.ensure_dirs()
    tiny_bert(settings.models_dir, CLS, name="tiny-bert")
    runtime = Runtime(settings, idle_ttl_s=0)
    try:
        runtime.load("starter", SMALL)
        app = make_app(runtime, settings)
        chosen = []
        app.ctx.bridge.embedder.choose("tiny-bert", lambda model, error: chosen.append((model, error)))
        qtbot.waitUntil(lambda: chosen == [("tiny-bert", None)], timeout=10_000)
        page = app.window.chat
        drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf"))
        reply_id, state = send(qtbot, page, "What is the harbour pilot fee?", max_tokens=8)
        assert state == "complete"
        sources = app.ctx.store.message(reply_id).sources
        assert sources["items"] and "BM25" not in sources["note"]  # keywords and vectors, fused
        view = page.transcript.view(reply_id)
        assert "found by keywords" not in view.sources.toggle.text()
    finally:
        runtime.close()


def _a_long_collection(qtbot, knowledge, notes):
    part = " ".join(f"The lens of lamp {i} is polished on day {i}." for i in range(12))
    notes.write_text("".join(f"# Part {n}\n\n{part}\n\n" for n in range(60)))
    with qtbot.wait_signal(knowledge.collections_changed, timeout=10_000):
        knowledge.create_from_files([notes], "notes")
    qtbot.waitUntil(lambda: bool(knowledge.rows) and knowledge.rows[0].collection.status == "completed", timeout=30_000)
    return knowledge


def test_an_embedder_change_is_asked_first_shows_its_progress_and_undo_unloads_its_copy(qtbot, make_app, tmp_path):
    """Issue 45: picking an embedder started a second model and re-embedded every collection with no word
    and no progress, and going back to None crashed the background work and left the copy loaded."""
    settings = Settings.from_env()
    settings.ensure_dirs()
    tiny_bert(settings.models_dir, CLS, name="tiny-bert")
    runtime = Runtime(settings, idle_ttl_s=0)
    try:
        app = make_app(runtime, settings)
        window = app.window
        knowledge = _a_long_collection(qtbot, window.pages["Knowledge"], tmp_path / "notes.md")
        window.show_page("Settings")
        box = window.pages["Settings"].documents
        qtbot.waitUntil(lambda: box.embedder.findData("tiny-bert") > 0, timeout=10_000)

        index = box.embedder.findData("tiny-bert")
        box.embedder.setCurrentIndex(index)
        box.embedder.activated.emit(index)  # what a click in the list does
        assert box.confirm.isVisible() and "tiny-bert" in box.question.text() and "re-embeds" in box.question.text()
        assert chosen_embedder(Settings.from_env()) is None  # nothing changed before the answer
        qtbot.mouseClick(box.keep_button, Qt.LeftButton)
        assert not box.confirm.isVisible() and box.embedder.currentIndex() == 0

        box.embedder.setCurrentIndex(index)
        box.embedder.activated.emit(index)
        with qtbot.wait_signal(box.progressed, timeout=15_000,
                               check_params_cb=lambda e: e is not None and e.embedder == "tiny-bert" and e.total > 0):
            qtbot.mouseClick(box.apply_button, Qt.LeftButton)  # the runner starts: passages wait for it
        assert box.progress.isVisible() and "Embedding with tiny-bert" in box.progress.format()
        qtbot.waitUntil(lambda: knowledge.embedding.isVisible() or not box.progress.isVisible(), timeout=15_000)
        qtbot.waitUntil(lambda: not box.progress.isVisible(), timeout=60_000)  # every passage has its vector
        assert "embedded by tiny-bert" in box.state.text()
        assert any(m.embedding and m.model_id == "tiny-bert" for m in runtime.loaded())

        assert box.undo.isVisible()
        with qtbot.wait_signal(box.chosen, timeout=15_000):
            qtbot.mouseClick(box.undo, Qt.LeftButton)
        qtbot.waitUntil(lambda: "keywords alone" in box.state.text(), timeout=10_000)
        assert chosen_embedder(Settings.from_env()) is None and box.embedder.currentIndex() == 0
        assert not any(m.embedding for m in runtime.loaded())  # its copy loaded to embed is gone
        assert not box.undo.isVisible()
    finally:
        runtime.close()
