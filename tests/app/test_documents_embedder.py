"""Settings → Documents: the embedders in the library are offered first, choosing one is kept (the engine's
choice, so ``fireside serve`` agrees) and the app's API server embeds its vector stores with it; choosing
None goes back to keywords alone, and the group says which it is."""

from __future__ import annotations

import httpx

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
        # the built-in embedder is chosen until another choice is made
        assert box.embedder.itemText(0) == NONE_LABEL and "embedded by minilm" in box.state.text()
        assert box.embedder.currentData() == "minilm"
        assert box.embedder.itemText(1) == "tiny-bert  · embedder"  # the embedder first, the chat model after
        assert any("starter  · chat model" in box.embedder.itemText(i) for i in range(box.embedder.count()))
        bar = window.chat.model_bar  # the chat's model picker offers models that can chat, not embedders
        bar.reload_list()
        qtbot.waitUntil(lambda: bar.combo.findData("starter") >= 0, timeout=10_000)
        assert bar.combo.findData("minilm") < 0 and bar.combo.findData("tiny-bert") < 0

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
