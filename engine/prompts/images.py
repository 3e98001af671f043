"""Images on the server's side of the runner pipe: decoding a file into an ``Image``, and placing images
in a rendered chat prompt.

``decode_image`` is the one door for image bytes, whoever sent them (an API dialect, the app's attach
button): Pillow reads the header first, and an image of more than ``MAX_PIXELS`` pixels (a
decompression bomb: 30000x30000 is a few KB of PNG) is refused before a pixel is decoded. Only PNG,
JPEG, WebP, GIF and BMP are read (never SVG, which is a program, or formats Pillow guesses at); a file
whose bytes are not the image type it claims, or that ends early, is refused. An animated image is
read as its first frame (as Ollama and llama-server do). The pixels go to the runner as 8-bit RGB
(``types.Image``), so llama.cpp never parses an image file: its decoder never sees hostile bytes.

A chat sends its images again with every turn, so the last files decoded are remembered by the SHA-256
of their bytes (``DECODED_BYTES`` of pixels at most, a pure memo: the same bytes decode to the same
pixels): the next turn hashes each file instead of decoding it (1.2 ms for a 320x240 PNG, tens of
milliseconds for a photo). The checks that do not depend on the pixels (size, SVG, the claimed type)
run on every call. ``probe_image`` runs the same checks on a file's header alone and gives an
``ImageFile`` (its size in pixels, no pixel decoded), so a server can weigh a request's images before it
decodes any, and decode them off its event loop (``server/imagebudget.py``).

``mark_images`` and ``place_images``: a chat template renders text, so each image part is replaced by a
marker that cannot occur in a message (a per-request nonce), the template renders, and the markers in
the rendered segments are replaced by the ``Image`` objects themselves: the runner's tokenizer thread
turns those into the model's image chunks (``runner/vision.py``).

Threading: plain functions, callable from any thread.
"""

from __future__ import annotations

import hashlib
import io
import re
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ImageRejected
from ..types import IMAGE_PART, Image

MAX_PIXELS = 4096 * 4096  # 48 MiB of RGB: past any projector's input (they resize to under 2k pixels a side)
MAX_IMAGE_BYTES = 20 * 1024 * 1024  # an encoded file (OpenAI's and Anthropic's own caps are 20 MB and 5 MB)
FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif", "BMP": "image/bmp"}
DECODED_BYTES = 64 * 1024 * 1024  # the pixels of recently decoded files kept for their next sending
Prompt = list  # segments ``(text, parse_special)`` with ``Image`` objects between them


@dataclass(frozen=True)
class ImageFile:
    """An image file as a request sent it, its header read and checked but no pixel decoded yet
    (``probe_image``): a server weighs every image of a request (``width * height``) before it decodes
    any, and decodes them off its event loop (``decode``)."""

    data: bytes = field(repr=False)
    media_type: str | None
    where: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height

    def part(self) -> dict[str, Any]:
        """This file as a message content part, until it is decoded into an ``Image`` part."""
        return {"type": FILE_PART, "file": self}

    def decode(self) -> Image:
        return decode_image(self.data, self.media_type, self.where)


FILE_PART = "image_file"  # a content part holding an ``ImageFile``: never reaches a runner


def probe_image(data: bytes, media_type: str | None = None, where: str = "image") -> ImageFile:
    """``data``'s header, checked as ``decode_image`` checks the file (size, type, claim, pixel cap),
    without decoding a pixel: a few hundred microseconds whatever the image's size."""
    _check_bytes(data, media_type, where)
    image = _recent.get(hashlib.sha256(data).digest())
    if image is not None:
        _check_claim(media_type, image.media_type, where)
        return ImageFile(data, media_type, where, image.width, image.height)
    img = _open(data, media_type, where)
    return ImageFile(data, media_type, where, *img.size)


def decode_image(data: bytes, media_type: str | None = None, where: str = "image") -> Image:
    """The pixels of the image file ``data``; ``media_type`` is what the sender said it is (checked).
    Raises ``ImageRejected`` (a 400) for anything that is not a whole, readable image of a read format."""
    _check_bytes(data, media_type, where)
    key = hashlib.sha256(data).digest()
    image = _recent.get(key)
    if image is None:
        image = _decode(data, media_type, where)
        _recent.put(key, image)
    _check_claim(media_type, image.media_type, where)
    return image


def _check_bytes(data: bytes, media_type: str | None, where: str) -> None:
    if not data:
        raise ImageRejected(f"{where}: the image is empty", where)
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRejected(f"{where}: the image is {len(data):,} bytes; the limit is {MAX_IMAGE_BYTES:,}", where)
    if (media_type and "svg" in media_type.lower()) or data.lstrip()[:5].lower() in (b"<?xml", b"<svg "):
        raise ImageRejected(f"{where}: SVG images are not read (send a PNG, JPEG, WebP, GIF or BMP)", where)


def _check_claim(media_type: str | None, found: str, where: str) -> None:
    if media_type and _claimed(media_type) not in (found, "image/*"):
        raise ImageRejected(f"{where}: the data says {media_type}, but the bytes are {found}", where)


def _decode(data: bytes, media_type: str | None, where: str) -> Image:
    img = _open(data, media_type, where)
    try:
        img.seek(0)  # an animated image: its first frame
        rgb = img.convert("RGB")  # decodes: a truncated or corrupt file fails here
    except Exception as exc:
        raise ImageRejected(f"{where}: the image is truncated or corrupt: {exc}", where) from None
    return Image(rgb.tobytes(), *img.size, FORMATS[img.format])


def _open(data: bytes, media_type: str | None, where: str) -> Any:
    """The Pillow image of ``data`` with only its header read, checked against the claim and the pixel cap."""
    from PIL import Image as PILImage

    try:
        img = PILImage.open(io.BytesIO(data), formats=list(FORMATS))
    except PILImage.DecompressionBombError as exc:
        raise ImageRejected(f"{where}: the image has too many pixels (a decompression bomb?): {exc}", where) from None
    except Exception as exc:
        if _sniff(data):  # the start of a real image, then nonsense or nothing
            raise ImageRejected(f"{where}: the {_sniff(data)} image is truncated or corrupt: {exc}", where) from None
        raise ImageRejected(f"{where}: not an image Fireside can read (PNG, JPEG, WebP, GIF or BMP): {exc}",
                            where) from None
    _check_claim(media_type, FORMATS[img.format], where)  # before a pixel is decoded
    width, height = img.size
    if width * height > MAX_PIXELS:
        raise ImageRejected(f"{where}: the image is {width:,}x{height:,} pixels; the limit is "
                            f"{MAX_PIXELS:,} pixels (4096x4096)", where)
    return img


class _Recent:
    """The images last decoded, by the hash of their file, up to ``DECODED_BYTES`` of pixels. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0
        self._items: OrderedDict[bytes, Image] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> Image | None:
        with self._lock:
            image = self._items.get(key)
            if image is not None:
                self._items.move_to_end(key)
            return image

    def put(self, key: bytes, image: Image) -> None:
        with self._lock:
            if key in self._items or len(image.pixels) > self.limit:
                return
            self._items[key] = image
            self.held += len(image.pixels)
            while self.held > self.limit:
                self.held -= len(self._items.popitem(last=False)[1].pixels)


_recent = _Recent(DECODED_BYTES)


def _sniff(data: bytes) -> str | None:
    """The media type a file's first bytes announce, if they are one of ``FORMATS``'s signatures."""
    signatures = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF87a": "image/gif",
                  b"GIF89a": "image/gif", b"BM": "image/bmp"}
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in signatures.items() if data.startswith(magic)), None)


def _claimed(media_type: str) -> str:
    claimed = media_type.split(";")[0].strip().lower()
    return "image/jpeg" if claimed in ("image/jpg", "image/pjpeg") else claimed


def mark_images(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[Image], str]:
    """``messages`` with each image part replaced by a text part holding a marker, the images in order,
    and the marker's nonce (``place_images`` finds the markers by it)."""
    nonce = secrets.token_hex(8)
    images: list[Image] = []
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(_is_image(p) for p in content):
            parts = []
            for p in content:
                if _is_image(p):
                    parts.append({"type": "text", "text": f"<fireside-image-{nonce}-{len(images)}>"})
                    images.append(p["image"])
                else:
                    parts.append(p)
            m = {**m, "content": parts}
        out.append(m)
    return out, images, nonce


def _is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == IMAGE_PART


def place_images(segments: list[tuple[str, bool]], images: list[Image], nonce: str) -> Prompt:
    """The rendered ``segments`` with each image's marker replaced by the image. A template that drops
    or repeats a message's content drops or repeats its image with it."""
    marker = re.compile(f"<fireside-image-{nonce}-(\\d+)>")
    out: Prompt = []
    for text, special in segments:
        at = 0
        for m in marker.finditer(text):
            out.append((text[at:m.start()], special))
            out.append(images[int(m.group(1))])
            at = m.end()
        out.append((text[at:], special))
    return [s for s in out if isinstance(s, Image) or s[0]]


def prompt_images(prompt: Any) -> int:
    """How many images a prompt holds (0 for a string or text-only segments)."""
    return 0 if isinstance(prompt, str) else sum(1 for s in prompt if isinstance(s, Image))


class LibraryProjectors:
    """The runtime's default ``projectors``: a model's vision projector is the one the library pairs with
    its file (``models/projector.py``); ``vision_models`` names the library's models that can see."""

    def __init__(self, settings: Any):
        self.settings = settings

    def __call__(self, model_id: str, path: Path) -> Path | None:
        from ..errors import FiresideError
        from ..library import Library

        try:
            return Library(self.settings).by_path(path).projector
        except (FiresideError, OSError):
            return None

    def vision_models(self) -> list[str]:
        from ..library import Library

        return [m.aliases[0] if m.aliases else m.id for m in Library(self.settings).list() if m.projector]
