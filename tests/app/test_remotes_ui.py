"""Remote engines are added and removed on the Settings page: the list shows whether each answers, and
the chat's model picker follows. The remote is a second real Fireside server on loopback."""

from __future__ import annotations

import keyring
import pytest
from keyring.backends import fail

from fireside.app import feedback
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.waiting import closed_port_url


@pytest.fixture
def fresh_app(make_app):
    """The app over a runtime in this test's own home, so its remotes file starts empty."""
    settings = Settings.from_env()
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0)
    yield make_app(runtime, settings)
    runtime.close()


def rows(box) -> list[str]:
    return [box.remotes.item(i).text() for i in range(box.remotes.count())]


def row_of(box, name: str) -> str:
    return next((text for text in rows(box) if text.startswith(f"{name} — ")), "")


def add(box, name: str, url: str, key: str = "") -> None:
    box.name.setText(name)
    box.url.setText(url)
    box.key.setText(key)
    box.add_button.click()


def picker_has(app, model_id: str) -> bool:
    return app.window.chat.model_bar.combo.findText(model_id) >= 0


def test_added_remote_is_listed_reachable_and_its_models_reach_the_picker(qtbot, fresh_app, remote_server,
                                                                         memory_keyring):
    box = fresh_app.window.pages["Settings"].remotes
    qtbot.waitUntil(lambda: rows(box) == ["No remote engines yet."])
    add(box, "lab", f"{remote_server.url}/v1", key="sk-lab")
    qtbot.waitUntil(lambda: "reachable," in row_of(box, "lab"), timeout=20_000)
    assert "key in keyring" in row_of(box, "lab") and "sk-lab" in memory_keyring.store.values()
    assert box.name.text() == box.url.text() == box.key.text() == ""
    qtbot.waitUntil(lambda: picker_has(fresh_app, "remote/lab/starter"), timeout=20_000)


def test_unreachable_remote_shows_its_error_and_removal_clears_it_everywhere(qtbot, fresh_app, remote_server):
    box = fresh_app.window.pages["Settings"].remotes
    add(box, "lab", remote_server.url)
    qtbot.waitUntil(lambda: picker_has(fresh_app, "remote/lab/starter"), timeout=20_000)
    add(box, "dead", f"{closed_port_url()}/v1")
    qtbot.waitUntil(lambda: "unreachable:" in row_of(box, "dead"), timeout=20_000)
    assert "cannot be reached" in row_of(box, "dead")  # the reason, in words

    box.remotes.setCurrentRow(rows(box).index(row_of(box, "lab")))
    box.remove_button.click()
    qtbot.waitUntil(lambda: not row_of(box, "lab") and bool(row_of(box, "dead")), timeout=20_000)
    qtbot.waitUntil(lambda: not picker_has(fresh_app, "remote/lab/starter"), timeout=20_000)
    assert [e.name for e in fresh_app.ctx.engine.list_remotes()] == ["dead"]


def test_bad_url_and_a_key_without_keyring_are_refused_in_words(qtbot, fresh_app):
    box = fresh_app.window.pages["Settings"].remotes
    add(box, "lab", "ftp://example")
    qtbot.waitUntil(lambda: "adding remote engine 'lab'" in (feedback.history or [""])[-1])
    assert "http" in feedback.history[-1] and fresh_app.window.notice.isVisible()

    keyring.set_keyring(fail.Keyring())
    add(box, "lab", "http://127.0.0.1:9/v1", key="sk-secret")
    qtbot.waitUntil(lambda: "No OS keyring" in feedback.history[-1], timeout=5_000)  # asked on a worker
    assert box.key.text() == "sk-secret"  # kept, so the user can clear it and add without a key
    assert fresh_app.ctx.engine.list_remotes() == []
