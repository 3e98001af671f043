"""Discover against a local fake hub serving real GGUF bytes: search, open a repo, see fit pills from
the real headers, download with progress, and find the model in My Models."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.helpers.hubfixtures import Q4, REPO, make_hub, run_fakehub

fakehub = pytest.fixture(run_fakehub)


def test_search_open_fit_and_download(qtbot, qtmodeltester, make_app, shared_runtime, fakehub):
    app = make_app(shared_runtime)
    settings = replace(app.ctx.settings, hf_endpoint=fakehub.url)
    app.ctx.extras["hub_factory"] = lambda: make_hub(settings)
    page = app.window.pages["Discover"]
    qtbot.keyClicks(page.query, "smol")
    page.search()
    qtbot.waitUntil(lambda: page.results.rowCount() >= 1, timeout=15_000)
    assert page.results.rows[0].id == REPO
    page.results_view.selectRow(0)
    qtbot.waitUntil(lambda: page.files.rowCount() == 2, timeout=15_000)
    qtbot.waitUntil(lambda: len(page.fits) == 2, timeout=15_000)
    assert all(not v.startswith("?") for v in page.fits.values()), page.fits
    qtmodeltester.check(page.results)
    qtmodeltester.check(page.files)
    row = next(i for i, f in enumerate(page.files.rows) if f.name == Q4)
    page.files_view.selectRow(row)
    models = app.window.pages["My Models"]
    with qtbot.waitSignal(page.downloads.model_added, timeout=30_000) as done:
        page.download.click()
    job = done.args[0]
    assert job.state == "done" and job.model.path.name == Q4
    assert page.downloads.rows[job.id].bar.value() == 1000
    qtbot.waitUntil(lambda: any(m.path.name == Q4 for m in models.table_model.rows), timeout=10_000)


def test_the_embedders_button_finds_embedding_models_on_the_hub(qtbot, make_app, shared_runtime, fakehub, tmp_path):
    from tests.helpers.bert_model import tiny_bert

    gguf = tiny_bert(tmp_path, name="nomic-embed-text-v1.5.Q8_0")[0].read_bytes()
    fakehub.add_repo("nomic-ai/nomic-embed-text-v1.5-GGUF", {"nomic-embed-text-v1.5.Q8_0.gguf": gguf})
    app = make_app(shared_runtime)
    settings = replace(app.ctx.settings, hf_endpoint=fakehub.url)
    app.ctx.extras["hub_factory"] = lambda: make_hub(settings)
    page = app.window.pages["Discover"]
    page.embedders.click()
    qtbot.waitUntil(lambda: page.results.rowCount() >= 1, timeout=15_000)
    assert [r.id for r in page.results.rows] == ["nomic-ai/nomic-embed-text-v1.5-GGUF"]  # not the chat model


def test_offline_search_says_so_shows_it_searching_and_download_waits_for_a_file(qtbot, make_app, shared_runtime,
                                                                                fakehub):
    """Issue 45: offline, Discover showed "[Errno ...]"; nothing said a search was under way; and Download
    stayed enabled with no file chosen (after another repo opened)."""
    from tests.helpers.waiting import free_port

    app = make_app(shared_runtime)
    app.window.show_page("Discover")
    page = app.window.pages["Discover"]
    offline = replace(app.ctx.settings, hf_endpoint=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    app.ctx.extras["hub_factory"] = lambda: make_hub(offline)
    qtbot.keyClicks(page.query, "smol")
    page.search()
    assert page.busy.isVisible() and "Searching" in page.status.text()
    qtbot.waitUntil(lambda: not page.busy.isVisible(), timeout=20_000)
    assert "offline" in page.status.text()
    shown = app.window.notice.text.text()
    assert "offline" in shown and "Errno" not in shown and "[" not in shown

    app.ctx.bridge.downloads.hub = None  # back online: the next call makes the hub afresh
    online = replace(app.ctx.settings, hf_endpoint=fakehub.url)
    app.ctx.extras["hub_factory"] = lambda: make_hub(online)
    page.search()
    qtbot.waitUntil(lambda: page.results.rowCount() >= 1, timeout=15_000)
    assert not page.download.isEnabled()  # no file chosen yet
    page.results_view.selectRow(0)
    qtbot.waitUntil(lambda: page.files.rowCount() == 2, timeout=15_000)
    assert not page.download.isEnabled()
    page.files_view.selectRow(0)
    assert page.download.isEnabled()
    page.open_repo(page.results.rows[0].id)  # the files are read again: the choice is gone
    assert not page.download.isEnabled()
    qtbot.waitUntil(lambda: page.files.rowCount() == 2, timeout=15_000)
    assert not page.download.isEnabled() and not page.files_view.selectionModel().selectedRows()
