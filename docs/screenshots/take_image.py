"""Take docs/screenshots/chat-image.png: a chat with an image sent and answered, and another one waiting
in the composer.

    Xvfb :99 -screen 0 1280x800x24 & DISPLAY=:99 python docs/screenshots/take_image.py

The real app, in a throwaway Fireside home whose library holds the tiny vision pair the tests build
(``tests/helpers/vision_model.py``: random weights, so the reply is nonsense; the picture is about the
app). The images are drawn here with Pillow, attached through the composer's drop road.
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
HOME = Path(tempfile.mkdtemp(prefix="fireside-shots-"))
os.environ["FIRESIDE_HOME"] = str(HOME)

from PySide6.QtCore import QMimeData, QUrl  # noqa: E402

from docs.screenshots.take import shot, start_app, wait  # noqa: E402


def landscape(path: Path, sun: tuple[int, int], sky=(135, 190, 235), size=(640, 420)) -> Path:
    """A small drawn landscape: sky, sun, hills, a lake."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", size, sky)
    d = ImageDraw.Draw(img)
    w, h = size
    d.ellipse((sun[0] - 40, sun[1] - 40, sun[0] + 40, sun[1] + 40), fill=(252, 205, 70))
    d.polygon([(0, h * 0.62), (w * 0.3, h * 0.35), (w * 0.6, h * 0.62)], fill=(70, 130, 80))
    d.polygon([(w * 0.35, h * 0.62), (w * 0.7, h * 0.3), (w, h * 0.62)], fill=(50, 105, 65))
    d.rectangle((0, h * 0.62, w, h), fill=(60, 120, 170))
    buf = io.BytesIO()
    img.save(buf, "PNG")
    path.write_bytes(buf.getvalue())
    return path


def drop(page, path: Path) -> None:
    attached = []
    page.image_attached.connect(attached.append)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    page.composer.insertFromMimeData(mime)
    wait(until=lambda: attached, timeout_ms=30_000)


def main() -> None:
    from fireside.engine.library import Library
    from fireside.engine.settings import Settings
    from tests.helpers.models import smollm2_file
    from tests.helpers.vision_model import build_vision_pair

    settings = Settings.from_env()
    settings.ensure_dirs()
    model, _mmproj = build_vision_pair(HOME / "downloads" / "Tiny-Vision-GGUF", smollm2_file())
    model_id = Library(settings).add_file(model).id
    _app, fireside, window = start_app()
    page = window.chat
    page.new_chat()
    bar = page.model_bar
    wait(until=lambda: bar.combo.findData(model_id) >= 0 and bar.sees_images(model_id), timeout_ms=30_000)
    bar.set_model(model_id)
    page.settings_panel.max_tokens.setValue(24)
    page.settings_panel.temperature.setValue(0)
    ended = []
    page.reply_ended.connect(lambda *a: ended.append(a))
    drop(page, landscape(HOME / "lake.png", (520, 80)))
    page.composer.setPlainText("What is in this picture?")
    page.send()
    wait(until=lambda: ended, timeout_ms=300_000)
    drop(page, landscape(HOME / "sunset.png", (110, 170), sky=(240, 150, 90)))
    page.composer.setPlainText("And this one, at sunset?")
    wait(1000)  # the sent card's thumbnail is read from disk on a worker
    shot(window, "chat-image")
    fireside.stop()


if __name__ == "__main__":
    main()
