"""Images in chats: attached and checked off the GUI thread, kept on disk by their content, and handed
to the engine as image parts when a reply is asked for.

An image the user attaches (the composer's button, a drop or a paste: one road for the three) is read
and decoded here by the engine (``Engine.decode_image``: a corrupt, mislabelled, SVG or oversized file
is refused with ``ImageRejected``, in words), then written once to ``data_dir/images/<sha256 of the
file's bytes>.<ext>`` with ``fsutil.atomic_write``, durable before its thumbnail is shown, so the
message that sends it never refers to a file that is not there, and two chats that send one picture
share one file. A message names its images (``store.py``'s ``message_images``); the chat session sends
them as ``saved_image`` parts and ``resolve`` turns those into the engine's ``Image`` parts on the
worker that runs the reply, decoding each file once (``DECODED_BYTES`` of decoded pixels are kept, so
the same picture on the chat's later turns is not decoded again). A file no message names any more
(its chat was deleted and purged, or it was attached and never sent) is removed by ``sweep`` at start.

Threading: ``ChatImages``' methods that take ``on_done`` run on the task pool and answer on the GUI
thread; ``resolve`` and ``sweep`` block (the disk) and are called on a worker.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
from PySide6.QtGui import QImage

from fireside.engine.errors import ImageRejected
from fireside.engine.fsutil import atomic_write
from fireside.engine.prompts import MAX_IMAGE_BYTES
from fireside.engine.types import Image

from .tasks import OnDone, Tasks

log = logging.getLogger(__name__)

SAVED_IMAGE = "saved_image"  # a message content part {"type": "saved_image", "name": file name}
THUMB_PX = 96  # a thumbnail's longer side, in the composer and in a sent card
DECODED_BYTES = 64 * 1024 * 1024  # decoded pixels kept for the next turns
EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/webp": "webp", "image/gif": "gif", "image/bmp": "bmp"}


@dataclass(frozen=True)
class Attachment:
    """An image checked and saved, waiting in the composer: ``name`` is its file in the images folder."""

    name: str
    label: str  # where it came from, for the user: a file name, or "pasted image"
    width: int
    height: int
    thumbnail: QImage = field(compare=False, repr=False)


def saved_part(name: str) -> dict[str, Any]:
    return {"type": SAVED_IMAGE, "name": name}


def thumbnail(image: QImage, size: int = THUMB_PX) -> QImage:
    if image.isNull() or (image.width() <= size and image.height() <= size):
        return image
    return image.scaled(size, size, Qt.KeepAspectRatio, Qt.SmoothTransformation)


class ChatImages:
    """The images folder and the decoded-image cache; owned by the ``EngineBridge`` (``bridge.images``)."""

    def __init__(self, engine, folder: Path, tasks: Tasks):
        self.engine, self.folder, self.tasks = engine, Path(folder), tasks
        self._decoded: OrderedDict[str, Image] = OrderedDict()
        self._lock = threading.Lock()

    def path(self, name: str) -> Path:
        if Path(name).name != name or name.startswith("."):  # a name from the database is a bare file name
            raise ImageRejected(f"{name!r} is not the name of a saved image")
        return self.folder / name

    # --- attaching -------------------------------------------------------------------------------
    def attach(self, source: Path | bytes | QImage, model_id: str | None, on_done: OnDone,
               media_type: str | None = None) -> None:
        """Check ``source`` (a file, a pasted file's bytes or a pasted picture) and save it, on a worker;
        ``on_done(Attachment, error)``. A model that cannot see is said so, naming the ones that can."""
        self.tasks.run_in_background(lambda: self._attach(source, model_id, media_type), on_done)

    def _attach(self, source: Path | bytes | QImage, model_id: str | None, media_type: str | None) -> Attachment:
        if model_id and not self.engine.can_see(model_id):
            vision = [m.id for m in self.engine.library().list() if m.projector]  # as the model picker names them
            raise ImageRejected(no_vision_text(model_id, vision))
        label, data = _read(source)
        try:
            image = self.engine.decode_image(data, media_type)
        except ImageRejected as exc:
            raise ImageRejected(f"{label} was not attached: {str(exc).removeprefix('image: ')}") from None
        name = f"{hashlib.sha256(data).hexdigest()}.{EXTENSIONS.get(image.media_type, 'img')}"
        path = self.path(name)
        if path.exists():
            os.utime(path)  # fresh: the start-up sweep leaves files attached while it runs
        else:
            atomic_write(path, data)
        with self._lock:
            self._keep(name, image)
        pixels = QImage(image.pixels, image.width, image.height, image.width * 3, QImage.Format_RGB888)
        return Attachment(name, label, image.width, image.height, thumbnail(pixels).copy())

    # --- showing ---------------------------------------------------------------------------------
    def thumbnails(self, names: list[str], on_done: OnDone) -> None:
        """``{name: QImage}`` thumbnails of saved images (a missing or unreadable one is left out)."""
        def work():
            found = {}
            for name in names:
                image = QImage(str(self.path(name)))
                if not image.isNull():
                    found[name] = thumbnail(image)
            return found
        self.tasks.run_in_background(work, on_done)

    def full(self, name: str, on_done: OnDone) -> None:
        """A saved image at full size, as a ``QImage``; ``ImageRejected`` when its file is gone."""
        def work():
            image = QImage(str(self.path(name)))
            if image.isNull():
                raise ImageRejected(f"the image {name} is missing or unreadable in {self.folder}")
            return image
        self.tasks.run_in_background(work, on_done)

    # --- replying (on the reply's worker) --------------------------------------------------------
    def resolve(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` with each ``saved_image`` part replaced by the image's ``Image`` part."""
        out = []
        for m in messages:
            content = m.get("content")
            if isinstance(content, list) and any(_is_saved(p) for p in content):
                m = {**m, "content": [self.decoded(p["name"]).part() if _is_saved(p) else p for p in content]}
            out.append(m)
        return out

    def decoded(self, name: str) -> Image:
        with self._lock:
            if name in self._decoded:
                self._decoded.move_to_end(name)
                return self._decoded[name]
        try:
            data = self.path(name).read_bytes()
        except OSError:
            raise ImageRejected(f"an image of this chat ({name}) is missing from {self.folder}") from None
        image = self.engine.decode_image(data)
        with self._lock:
            self._keep(name, image)
        return image

    def _keep(self, name: str, image: Image) -> None:
        self._decoded[name] = image
        self._decoded.move_to_end(name)
        while len(self._decoded) > 1 and sum(len(i.pixels) for i in self._decoded.values()) > DECODED_BYTES:
            self._decoded.popitem(last=False)

    # --- tidying ---------------------------------------------------------------------------------
    def sweep_later(self, referenced: set[str], on_done: OnDone | None = None) -> None:
        """``sweep`` on the pool, for the files written before now (start-up calls it once)."""
        now = time.time()
        self.tasks.run_in_background(lambda: self.sweep(referenced, now), on_done)

    def sweep(self, referenced: set[str], before: float) -> list[str]:
        """Delete the saved images no message names, written before ``before`` (an attachment waiting in
        the composer is newer); returns the names deleted."""
        gone = []
        for path in sorted(self.folder.glob("*.*")) if self.folder.is_dir() else []:
            if path.name in referenced or path.name.startswith(".") or path.stat().st_mtime >= before:
                continue
            path.unlink(missing_ok=True)
            gone.append(path.name)
        if gone:
            log.info("deleted %d chat image(s) no message refers to any more", len(gone))
        return gone


def no_vision_text(model_id: str, vision: list[str]) -> str:
    can = (f"Models in your library that can: {', '.join(vision[:5])} (choose one in the model bar)." if vision
           else "No model in your library can: add a vision model (a GGUF with its mmproj projector, e.g. SmolVLM).")
    return f"{model_id} cannot see images: it reads text only. {can}"


def _is_saved(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == SAVED_IMAGE


def _read(source: Path | bytes | QImage) -> tuple[str, bytes]:
    """(what to call it, its bytes): a file is read whole, up to the engine's size cap; a picture pasted
    without its file's bytes is saved as PNG."""
    if isinstance(source, QImage):
        buffer = QByteArray()
        device = QBuffer(buffer)
        device.open(QIODevice.WriteOnly)
        source.save(device, "PNG")
        return "the pasted image", bytes(buffer.data())
    if isinstance(source, (bytes, bytearray)):
        return "the pasted image", bytes(source)
    path = Path(source)
    try:
        size = path.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise ImageRejected(f"{path.name} was not attached: it is {size:,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
        return path.name, path.read_bytes()
    except OSError as exc:
        raise ImageRejected(f"{path.name} was not attached: {exc.strerror or exc}") from None

