"""Documents in the Chat page, with the real SmolLM2 (context 2048), real widgets, the real chats database
and the real document readers and index: a long PDF dropped on the composer is read off the GUI thread,
indexed in the chat's own index and the passage that answers the question is given to the model as
source [1], naming its page; a short DOCX goes in whole, its sources naming their headings and pages;
the sources are listed under the reply, a ``[n]`` in the reply links to its source, and a source opens
in its context; a restart keeps them and the Markdown export quotes them; a corrupt PDF, binary data
named .txt and a file over the cap are refused in words, the typed text kept; a document taken off while
it is read is dropped without a word."""

from __future__ import annotations

import random

import pytest
from PySide6.QtCore import QMimeData, QUrl

from fireside.engine.documents.embedding import choose_embedder
from fireside.engine.settings import Settings
from tests.engine.documents.files import write_docx, write_pdf
from tests.helpers.driving import send

pytestmark = pytest.mark.model

ANSWER_PAGE = 17
WORDS = ("amber basalt cedar delta ember fjord granite heron island juniper kestrel lagoon meadow nectar orchard "
         "pebble quartz river saffron tundra umber valley willow yarrow zephyr copper marble thistle lantern "
         "harvest glacier canyon prairie summit ridge hollow brook spruce maple birch aspen clover").split()


def long_pdf(path, pages: int = 30):
    """A PDF of ``pages`` pages of varied filler, long past a 2048-token context, whose page 17 alone says
    what the harbour pilot fee is."""
    rng = random.Random(7)
    texts = []
    for number in range(1, pages + 1):
        lines = [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(8)]
        if number == ANSWER_PAGE:
            lines[3] = "The harbour pilot fee is forty-two crowns for each vessel."
        texts.append("\n".join(lines))
    return write_pdf(path, texts)


def drop(qtbot, page, path, signal: str = "document_attached"):
    """Drop ``path`` on the message box and wait for it to be read and attached, or refused."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    with qtbot.waitSignal(getattr(page, signal), timeout=30_000) as blocker:
        page.composer.insertFromMimeData(mime)
    return blocker.args[0]


def test_a_long_pdf_is_retrieved_from_and_its_sources_name_the_page(qtbot, make_app, loaded_runtime, tmp_path):
    choose_embedder(Settings.from_env(), None)  # keywords alone, as Settings → Documents' None gives
    first = make_app(loaded_runtime)
    page = first.window.chat
    attachment = drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf"))
    assert attachment.pages == 30 and attachment.label == "harbour.pdf"
    [chip] = page.bar.doc_chips.values()
    assert chip.label.text() == "harbour.pdf · 30 pages" and chip.progress.isHidden()

    reply_id, state = send(qtbot, page, "What is the harbour pilot fee?", max_tokens=8)
    assert state == "complete" and not page.bar.doc_chips
    store = first.ctx.store
    reply = store.message(reply_id)
    items = reply.sources["items"]
    assert items[0]["file"] == "harbour.pdf" and items[0]["page"] == ANSWER_PAGE
    assert "forty-two crowns" in items[0]["text"] and items[0]["mode"] == "retrieved"
    assert len(items) == 1  # the one passage that matches the question, not the whole book
    assert "BM25" in reply.sources["note"]  # no embedder is chosen, and the app says so
    assert reply.stats["prompt_tokens"] > 200  # the passages went into the prompt
    assert (first.settings.data_dir / "documents" / "chats" / f"{page.conv_id}.sqlite").exists()

    view = page.transcript.view(reply_id)
    # the starter cites the passage ([1]) or not, by a near tie that the thread count in use can flip
    assert view.sources.isVisible() and view.sources.toggle.text() in (
        f"Sources ({len(items)}) · found by keywords", f"Sources ({len(items)}) · 1 cited · found by keywords")
    view.sources.toggle.click()
    assert "harbour.pdf, page 17" in view.sources.list.text() and view.sources.note.isVisible()
    with qtbot.waitSignal(page.source_shown, timeout=10_000) as shown:
        view.sources.list.linkActivated.emit("source:1")
    dialog = shown.args[0]
    text = dialog.text.toPlainText()
    assert "forty-two crowns" in text and len(text) > len(items[0]["text"]) + 100  # the pages around it too
    assert "page 17" in dialog.windowTitle()
    dialog.close()

    # a reply that cites [1] links it: the marker opens the source
    store.update_message(reply_id, content="The fee is forty-two crowns [1].")
    page.open_conversation(page.conv_id)
    view = page.transcript.view(reply_id)
    assert 'href="source:1"' in view.body.toHtml()
    assert view.sources.toggle.text() == "Sources (1) · 1 cited · found by keywords"
    with qtbot.waitSignal(page.source_shown, timeout=10_000):
        view.body.anchorClicked.emit(QUrl("source:1"))
    page.viewers.source_dialog.close()

    conv_id = page.conv_id
    first.stop()
    restarted_keeps_and_exports_them(qtbot, make_app(loaded_runtime), conv_id, reply_id, items, tmp_path)


def restarted_keeps_and_exports_them(qtbot, again, conv_id: int, reply_id: int, items: list, tmp_path):
    """A restarted app shows the reply's sources from the chats database, and its Markdown quotes them."""
    page = again.window.chat
    assert page.conv_id == conv_id
    view = page.transcript.view(reply_id)
    assert view.sources.isVisible() and view.sources.items == items
    user = again.ctx.store.thread(conv_id)[0]
    assert user.documents[0]["file"] == "harbour.pdf" and "harbour.pdf" in view.sources.list.text()

    md = tmp_path / "export" / "chat.md"
    page.export(conv_id, "markdown", md)
    qtbot.waitUntil(md.exists, timeout=10_000)
    exported = md.read_text()
    assert "Attached: harbour.pdf" in exported and "[1] harbour.pdf, page 17" in exported
    assert "> " + items[0]["text"].splitlines()[0] in exported and "BM25" in exported


def test_a_short_docx_goes_in_whole_and_its_sources_name_headings_and_pages(qtbot, app, tmp_path):
    page = app.window.chat
    attachment = drop(qtbot, page, write_docx(tmp_path / "manual.docx"))
    assert attachment.pages == 2
    page.settings_panel.temperature.setValue(0)  # one reply every run: a [n] it writes would list that source first
    reply_id, state = send(qtbot, page, "How often does the fog horn compressor need oil?", max_tokens=8)
    assert state == "complete"
    items = app.ctx.store.message(reply_id).sources["items"]
    assert {s["mode"] for s in items} == {"whole"}  # it fits: every passage went in
    fog = next(s for s in items if "200 hours" in s["text"])
    assert fog["page"] == 2 and fog["heading"].endswith("Fog Signal")
    assert fog["rank"] == 1  # the passage that matches the question is listed first
    view = page.transcript.view(reply_id)
    view.sources.open_list()
    assert view.sources.list.text().index(f'href="source:{fog["n"]}"') < view.sources.list.text().index("chamois")
    lamp = next(s for s in items if "chamois" in s["text"])
    assert lamp["page"] == 1 and lamp["heading"].endswith("Lamp Room")
    assert not app.ctx.store.message(reply_id).sources["note"]  # nothing was searched for
    user_card = page.transcript.view(app.ctx.store.thread(page.conv_id)[0].id)
    assert user_card.documents.text() == "Attached: manual.docx (2 pages)"

    # the next turn sends it again, whole, from the saved copy
    second_id, state = send(qtbot, page, "Where are spare bulbs kept?", max_tokens=8)
    assert state == "complete"
    assert any("brass cabinet" in s["text"] for s in app.ctx.store.message(second_id).sources["items"])


def test_bad_documents_are_refused_in_words_and_the_text_stays(qtbot, app, tmp_path, fresh_feedback):
    page = app.window.chat
    page.composer.setPlainText("Summarise this")
    good = long_pdf(tmp_path / "good.pdf", pages=2)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(good.read_bytes()[:300])  # cut off
    said = drop(qtbot, page, broken, "document_refused")
    assert said.startswith("Not attached: broken.pdf") and "PDF" in said
    locked = write_pdf(tmp_path / "locked.pdf", ["secret"], password="hunter2")
    assert "encrypted" in drop(qtbot, page, locked, "document_refused")
    binary = tmp_path / "notes.txt"
    binary.write_bytes(bytes(range(256)) * 40)
    assert "binary data" in drop(qtbot, page, binary, "document_refused")
    huge = tmp_path / "huge.txt"
    with open(huge, "wb") as fh:
        fh.truncate(33 * 1024 * 1024)  # sparse: over the 32 MB cap without writing it
    assert "over 32 MB" in drop(qtbot, page, huge, "document_refused")
    assert page.composer.toPlainText() == "Summarise this" and not page.bar.doc_chips
    assert not list((app.settings.data_dir / "documents").glob("*.*"))  # nothing saved

    page.attacher.attach_document(good)  # taken off while it is read: dropped, nothing said
    [key] = page.bar.doc_chips
    page.bar.doc_chips[key].remove_button.click()
    qtbot.waitUntil(lambda: not page.attacher._reading, timeout=10_000)
    assert not page.bar.doc_chips and not any("good.pdf" in said for said in fresh_feedback)
    assert drop(qtbot, page, good).label == "good.pdf"  # the next one is fine
    assert page.composer.toPlainText() == "Summarise this"


def test_the_prompt_numbers_the_passages_with_their_pages_and_asks_for_citations(qtbot, make_app, loaded_runtime,
                                                                                tmp_path):
    """What the model reads: a whole document in the message that attached it, with its name and page
    markers; the passages retrieved from a long one in front of the question (by keywords here: the one
    passage that matches), numbered after it; and the request to cite [n]."""
    from fireside.engine.documents.grounding import CITE

    choose_embedder(Settings.from_env(), None)
    app = make_app(loaded_runtime)

    page = app.window.chat
    short, long = (drop(qtbot, page, write_docx(tmp_path / "manual.docx")),
                   drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf")))
    parts = [short.part(), long.part()]
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "What is the harbour pilot fee?"}, *parts]}]
    out, sources = app.ctx.bridge.documents.ground(1, "starter", messages, 8)
    [system, user] = out
    assert system == messages[0] and isinstance(user["content"], str)
    text = user["content"]
    assert text.startswith("Document: manual.docx (2 pages)") and "page 2 · Lighthouse Maintenance Manual > Fog Signal" in text
    whole = [s for s in sources["items"] if s["mode"] == "whole"]
    [retrieved] = [s for s in sources["items"] if s["mode"] == "retrieved"]
    assert retrieved["n"] == len(whole) + 1 and retrieved["page"] == ANSWER_PAGE
    assert f"[{retrieved['n']}] harbour.pdf, page {ANSWER_PAGE}\n" in text
    assert text.index("End of document: manual.docx") < text.index("Sources:") < text.index(CITE)
    assert text.endswith("Question: What is the harbour pilot fee?")


def test_documents_are_read_indexed_and_saved_off_the_gui_thread_and_an_edit_brings_them_back(
        qtbot, app, tmp_path, monkeypatch):
    from fireside.app.bridge import chatdocs
    from fireside.engine.documents import DocumentIndex
    from tests.helpers.guithread import GuiThreadIO

    guard = GuiThreadIO.armed(monkeypatch, expected_db=("chats.sqlite3",))
    monkeypatch.setattr(chatdocs, "read_document", guard._wrap("read_document", chatdocs.read_document))
    for method in ("add_document", "search"):
        monkeypatch.setattr(DocumentIndex, method, guard._wrap(f"DocumentIndex.{method}", getattr(DocumentIndex, method)))
    page = app.window.chat
    drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf"))
    reply_id, _state = send(qtbot, page, "What is the harbour pilot fee?", max_tokens=4)
    view = page.transcript.view(reply_id)
    with qtbot.waitSignal(page.source_shown, timeout=10_000):
        view.sources.list.linkActivated.emit("source:1")
    page.viewers.source_dialog.close()
    user = app.ctx.store.thread(page.conv_id)[0]
    with qtbot.waitSignal(page.document_attached, timeout=30_000):
        page.transcript.view(user.id).edit_button.click()  # the edited message's document comes back
    assert [c.label.text() for c in page.bar.doc_chips.values()] == ["harbour.pdf · 30 pages"]
    assert not guard.calls, guard.report()


def test_a_deleted_chats_documents_and_index_go_at_the_next_start(qtbot, make_app, loaded_runtime, tmp_path):
    first = make_app(loaded_runtime)
    page = first.window.chat
    folder = first.settings.data_dir / "documents"
    sent = drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf"))
    send(qtbot, page, "What is the harbour pilot fee?", max_tokens=2)
    doomed = page.conv_id
    index = folder / "chats" / f"{doomed}.sqlite"
    page.new_chat()
    kept = drop(qtbot, page, long_pdf(tmp_path / "other.pdf", pages=3))
    send(qtbot, page, "What is on page 2?", max_tokens=2)
    never_sent = drop(qtbot, page, write_docx(tmp_path / "manual.docx"))  # attached, then the app closes
    page.delete_conversation(doomed)
    assert (folder / sent.name).exists() and index.exists()  # Undo can still bring the chat back
    first.stop()

    again = make_app(loaded_runtime)  # the deleted chat is purged; so are its documents and its index
    qtbot.waitUntil(lambda: not (folder / sent.name).exists() and not index.exists(), timeout=10_000)
    assert not (folder / never_sent.name).exists()
    assert (folder / kept.name).exists()  # the other chat still names it
    assert again.ctx.store.thread(again.window.chat.conv_id)[0].documents[0]["name"] == kept.name


@pytest.mark.parametrize(("name", "body", "kind"), [
    ("notes.md", "# Tides\n\nHigh water at noon.\n\n```\ncode stays whole\n```\n", "markdown"),
    ("page.html", "<html><body><h1>Tides</h1><p>High water at noon.</p></body></html>", "html"),
    ("tides.py", "def high_water():\n    return 'noon'\n", "code"),
    ("log.txt", "High water at noon.\n\nLow water at six.\n", "text"),
])
def test_markdown_html_code_and_text_attach_with_their_size(qtbot, app, tmp_path, name, body, kind):
    page = app.window.chat
    path = tmp_path / name
    path.write_text(body)
    attachment = drop(qtbot, page, path)
    assert attachment.kind == kind and attachment.pages is None
    [chip] = page.bar.doc_chips.values()
    assert chip.label.text() == f"{name} · {attachment.chars} characters"


def test_the_markdown_export_quotes_the_cited_sources_first_and_counts_the_rest(tmp_path):
    from fireside.app import export
    from fireside.app.store import Store

    store = Store(tmp_path / "chats.sqlite3")
    conv = store.create_conversation("Manual", "starter")
    user = store.add_message(conv.id, None, "user", "When is the lens polished?",
                             documents=[{"name": "abc.pdf", "file": "manual.pdf", "kind": "pdf", "pages": 8}])
    items = [{"n": n, "file": "manual.pdf", "page": n, "page_end": n, "heading": "", "text": f"Page {n} text.",
              "name": "abc.pdf", "ordinal": n - 1, "mode": "whole", "rank": n} for n in range(1, 9)]
    reply = store.add_message(conv.id, user.id, "assistant", "On Tuesdays [7].", model_id="starter")
    store.update_message(reply.id, sources={"items": items, "note": ""})
    md = export.to_markdown(store, conv.id)
    assert "Attached: manual.pdf" in md
    quoted = [line for line in md.splitlines() if line.startswith("[")]
    assert quoted == ["[7] manual.pdf, page 7", *(f"[{n}] manual.pdf, page {n}" for n in range(1, 5))]
    assert "> Page 7 text." in md and "...and 3 more passages" in md
    assert '"sources"' in export.to_json(store, conv.id) and "Page 8 text." in export.to_json(store, conv.id)


def test_a_pdf_shows_its_reading_progress_and_taking_it_off_stops_the_reading(qtbot, app, tmp_path, monkeypatch,
                                                                             fresh_feedback):
    from fireside.app.bridge import chatdocs

    page = app.window.chat
    shown, read = [], []
    progress = page.bar.document_progress
    monkeypatch.setattr(page.bar, "document_progress", lambda key, n, count: (shown.append((n, count)),
                                                                               progress(key, n, count)))
    reader = chatdocs.read_document

    def counting(path, on_page=None):
        return reader(path, lambda n, count: (read.append(n), on_page(n, count)))
    monkeypatch.setattr(chatdocs, "read_document", counting)

    drop(qtbot, page, long_pdf(tmp_path / "harbour.pdf"))
    assert shown and shown[-1] == (30, 30)  # the chip counted the pages as they were read
    page.bar.clear_attachments()

    big = long_pdf(tmp_path / "big.pdf", pages=400)
    shown.clear(), read.clear()
    page.attacher.attach_document(big)
    [key] = page.bar.doc_chips
    qtbot.waitUntil(lambda: bool(shown), timeout=20_000)
    assert page.bar.doc_chips[key].progress.maximum() == 400
    page.composer.setPlainText("Summarise it")
    page.send()  # not yet: the document would be left out
    assert "big.pdf is still being read" in fresh_feedback[-1] and page.composer.toPlainText() == "Summarise it"
    page.bar.doc_chips[key].remove_button.click()
    qtbot.waitUntil(lambda: not page.attacher._reading, timeout=20_000)
    assert max(read) < 400 and not page.bar.doc_chips  # it stopped between pages, and nothing was attached
    assert not any(p.suffix == ".pdf" and p.name.startswith(".") for p in (app.settings.data_dir / "documents").glob("*"))
