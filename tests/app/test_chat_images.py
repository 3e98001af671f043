"""Images in the Chat page, on the tiny vision pair (``tests/helpers/vision_model.py``) in the test's own
library, through the real runtime, real widgets and the real chats database: an image dropped on the
composer is checked and saved off the GUI thread, sent with the message and answered; its thumbnail is in
the sent card and opens full size; the next turn sends it again (from the slot's cache); a restarted app
shows it and exports it in Markdown; the picker marks the model that can see; a corrupt file or a model
that cannot see is refused in words with the typed text kept; a deleted chat's image file goes (at the next
start, once Undo is no longer offered) unless another chat still sends it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QUrl
from PySide6.QtGui import QImage

from fireside.app.chat.picker import VISION_MARK
from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from tests.helpers.driving import send
from tests.helpers.vision_model import IMAGE_TOKENS, image_bytes

pytestmark = pytest.mark.model


@pytest.fixture
def vision_home(tmp_path, vision_pair):
    """A Fireside home whose library holds the tiny vision pair, and a runtime over it: (runtime, settings,
    the model's id)."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    model = Library(settings).add_file(vision_pair[0])
    assert model.projector is not None  # its mmproj came along: a vision model
    runtime = Runtime(settings, idle_ttl_s=0)
    yield runtime, settings, model.id
    runtime.close()


def start(make_app, vision_home):
    runtime, settings, model_id = vision_home
    app = make_app(runtime, settings)
    app.window.chat.model_bar.set_model(model_id)
    return app, app.window.chat


def drop(qtbot, page, path: Path, signal: str = "image_attached"):
    """Drop ``path`` on the message box (a paste takes the same road: ``insertFromMimeData``) and wait
    for it to be attached, or refused."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    assert page.composer.canInsertFromMimeData(mime)
    with qtbot.waitSignal(getattr(page, signal), timeout=20_000) as blocker:
        page.composer.insertFromMimeData(mime)
    return blocker.args[0]


def picture(tmp_path: Path, seed: int, name: str | None = None, **kwargs) -> Path:
    path = tmp_path / (name or f"picture-{seed}.png")
    path.write_bytes(image_bytes(seed, **kwargs))
    return path


def test_an_image_is_sent_answered_kept_and_shown_after_a_restart(qtbot, make_app, vision_home, tmp_path):
    first, page = start(make_app, vision_home)
    model_id = vision_home[2]
    bar = page.model_bar
    qtbot.waitUntil(lambda: bar.combo.itemText(bar.combo.findData(model_id)).endswith(VISION_MARK), timeout=20_000)
    assert bar.current() == model_id  # the mark is only shown: the chat still names the model
    path = picture(tmp_path, 1, size=(120, 80))
    attachment = drop(qtbot, page, path)
    data = path.read_bytes()
    assert attachment.name == hashlib.sha256(data).hexdigest() + ".png"
    assert list(page.bar.chips) == [attachment.name] and page.bar.strip_box.isVisible()
    saved = first.settings.data_dir / "images" / attachment.name
    assert saved.read_bytes() == data  # on disk before the message that names it

    reply_id, state = send(qtbot, page, "What is in this picture?", max_tokens=6)
    assert state == "complete" and not page.bar.chips  # sent: the composer is empty again
    store = first.ctx.store
    user = store.thread(page.conv_id)[0]
    assert user.images == [attachment.name] and user.content == "What is in this picture?"
    stats = store.message(reply_id).stats
    assert stats["prompt_tokens"] > IMAGE_TOKENS and store.message(reply_id).content
    card = page.transcript.view(user.id)
    qtbot.waitUntil(lambda: not card.pictures.buttons[attachment.name].icon().isNull(), timeout=10_000)
    with qtbot.waitSignal(page.image_viewed, timeout=10_000):
        card.pictures.buttons[attachment.name].click()
    assert page.viewers.viewer.picture.pixmap().size().toTuple() == (120, 80)  # full size
    page.viewers.viewer.close()

    # the next turn sends the image again: the first turn's prompt, image included, comes from the cache
    second_id, state = send(qtbot, page, "And its colours?", max_tokens=6)
    assert state == "complete"
    assert store.message(second_id).stats["cached_tokens"] >= stats["prompt_tokens"] - 1

    conv_id = page.conv_id
    first.stop()
    again, page = start(make_app, vision_home)
    assert page.conv_id == conv_id
    card = page.transcript.view(user.id)
    qtbot.waitUntil(lambda: not card.pictures.buttons[attachment.name].icon().isNull(), timeout=10_000)
    assert saved.exists()  # the start-up sweep keeps what a message names

    md = tmp_path / "export" / "chat.md"
    page.export(conv_id, "markdown", md)
    qtbot.waitUntil(md.exists, timeout=10_000)
    assert f"![image 1](<chat-images/{attachment.name}>)" in md.read_text()
    assert (md.parent / "chat-images" / attachment.name).read_bytes() == data


def test_a_corrupt_file_is_refused_in_words_and_the_text_stays(qtbot, make_app, vision_home, tmp_path):
    app, page = start(make_app, vision_home)
    page.composer.setPlainText("Look at this")
    broken = tmp_path / "holiday.png"
    broken.write_bytes(image_bytes(2)[:70])  # the start of a PNG, cut off
    said = drop(qtbot, page, broken, "image_refused")
    assert "holiday.png was not attached" in said and "truncated or corrupt" in said
    assert page.composer.toPlainText() == "Look at this" and not page.bar.chips
    assert not list((app.settings.data_dir / "images").glob("*"))  # nothing saved
    svg = tmp_path / "logo.png"
    svg.write_bytes(b'<svg xmlns="http://www.w3.org/2000/svg"/>')
    assert "SVG" in drop(qtbot, page, svg, "image_refused")
    good = drop(qtbot, page, picture(tmp_path, 3))  # the next one is fine
    assert list(page.bar.chips) == [good.name] and page.composer.toPlainText() == "Look at this"


def test_a_model_that_cannot_see_says_so_and_names_one_that_can(qtbot, make_app, vision_home, tmp_path):
    app, page = start(make_app, vision_home)
    page.model_bar.set_model("starter")  # SmolLM2 reads text only
    page.composer.setPlainText("Describe it")
    said = drop(qtbot, page, picture(tmp_path, 4), "image_refused")
    assert "starter cannot see images" in said and vision_home[2] in said
    assert page.composer.toPlainText() == "Describe it" and not page.bar.chips


def test_deleting_a_chat_deletes_its_image_files_unless_another_chat_sends_them(qtbot, make_app, vision_home,
                                                                              tmp_path):
    first, page = start(make_app, vision_home)
    folder = first.settings.data_dir / "images"
    shared, own = drop(qtbot, page, picture(tmp_path, 5)), drop(qtbot, page, picture(tmp_path, 6))
    send(qtbot, page, "Two pictures.", max_tokens=2)
    doomed = page.conv_id
    page.new_chat()
    page.model_bar.set_model(vision_home[2])
    assert drop(qtbot, page, picture(tmp_path, 5, "same-picture.png")).name == shared.name  # one file
    send(qtbot, page, "One picture.", max_tokens=2)
    never_sent = drop(qtbot, page, picture(tmp_path, 7))
    page.delete_conversation(doomed)
    assert (folder / own.name).exists()  # Undo can still bring the chat back
    first.stop()

    again, page = start(make_app, vision_home)  # the deleted chat is purged; so are the files only it sent
    qtbot.waitUntil(lambda: not (folder / own.name).exists() and not (folder / never_sent.name).exists(),
                    timeout=10_000)
    assert (folder / shared.name).exists()  # the other chat still sends it
    assert [m.images for m in again.ctx.store.thread(page.conv_id)][0] == [shared.name]


def test_the_button_and_a_paste_attach_and_an_edit_brings_the_images_back(qtbot, make_app, vision_home, tmp_path,
                                                                          monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    app, page = start(make_app, vision_home)
    path = picture(tmp_path, 8)
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: ([str(path)], ""))
    with qtbot.waitSignal(page.image_attached, timeout=20_000) as chosen:
        page.bar.attach_button.click()
    mime = QMimeData()
    mime.setData("image/png", image_bytes(9))  # a picture copied from another app
    with qtbot.waitSignal(page.image_attached, timeout=20_000) as pasted:
        page.composer.insertFromMimeData(mime)
    assert pasted.args[0].label == "the pasted image"
    names = [chosen.args[0].name, pasted.args[0].name]
    assert list(page.bar.chips) == names
    screenshot = QMimeData()  # a picture offered without its file's bytes (a screenshot tool): saved as PNG
    screenshot.setImageData(QImage.fromData(image_bytes(11, size=(30, 20))))
    with qtbot.waitSignal(page.image_attached, timeout=20_000) as grabbed:
        page.composer.insertFromMimeData(screenshot)
    assert (grabbed.args[0].width, grabbed.args[0].height) == (30, 20) and grabbed.args[0].name.endswith(".png")
    page.bar.remove_attachment(grabbed.args[0].name)
    page.bar.chips[names[0]][0].remove_button.click()  # taken off before sending
    assert list(page.bar.chips) == names[1:]
    send(qtbot, page, "", max_tokens=2)  # an image alone is a message too
    user = app.ctx.store.thread(page.conv_id)[0]
    assert user.images == names[1:] and app.ctx.store.conversation(page.conv_id).title == "An image"
    with qtbot.waitSignal(page.image_attached, timeout=20_000):
        page.transcript.view(user.id).edit_button.click()
    assert list(page.bar.chips) == names[1:]  # editing the message keeps its image unless it is removed


def test_images_are_read_decoded_and_written_off_the_gui_thread(qtbot, make_app, vision_home, tmp_path, monkeypatch):
    import PIL.Image

    from fireside.engine.facade import Engine
    from tests.helpers.guithread import GuiThreadIO

    guard = GuiThreadIO.armed(monkeypatch, expected_db=("chats.sqlite3",))
    monkeypatch.setattr(Engine, "decode_image", staticmethod(guard._wrap("Engine.decode_image", Engine.decode_image)))
    monkeypatch.setattr(PIL.Image, "open", guard._wrap("PIL.Image.open", PIL.Image.open))
    decodes = []
    monkeypatch.setattr(Engine, "decode_image", staticmethod(_counting(Engine.decode_image, decodes)))
    first, page = start(make_app, vision_home)
    name = drop(qtbot, page, picture(tmp_path, 10)).name
    send(qtbot, page, "Look.", max_tokens=2)
    send(qtbot, page, "Again.", max_tokens=2)
    assert len(decodes) == 1  # checked once when attached; both turns took the decoded image from the cache
    card = page.transcript.view(first.ctx.store.thread(page.conv_id)[0].id)
    with qtbot.waitSignal(page.image_viewed, timeout=10_000):
        card.pictures.buttons[name].click()
    page.viewers.viewer.close()
    md = tmp_path / "chat.md"
    page.export(page.conv_id, "markdown", md)
    qtbot.waitUntil(md.exists, timeout=10_000)
    first.stop()
    make_app(*vision_home[:2])  # the start-up sweep walks the images folder
    assert not guard.calls, guard.report()


def _counting(fn, calls: list):
    def counted(*args, **kwargs):
        calls.append(args)
        return fn(*args, **kwargs)
    return counted
