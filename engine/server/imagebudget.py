"""Every image a request carries, weighed before any is decoded and decoded off the event loop.

A dialect turns each inline image into an ``ImageFile`` part (``inbound.image_of``: its header read and
checked, no pixel decoded) and each http(s) URL into a link part, fetched here (``imagelinks.py``). Then,
in the shared handler (and Anthropic's ``count_tokens``), ``decoded`` counts the request's images and
their pixels: past ``MAX_REQUEST_IMAGES`` or ``MAX_REQUEST_PIXELS`` the request is a 413 that says the
limits and how to stay under them, before a pixel is decoded; under them, every image is decoded on a
worker thread, so the event loop keeps serving other clients. Ten 4096x4096 1-bit PNGs (29 KB of
request) were decoded on the event loop for 4.3 s, grew the server 640 MB and held another client's
``GET /api/version`` as long, only to be refused because the model could not see.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ..prompts import FILE_PART, MAX_PIXELS, ImageFile
from ..types import ChatRequest
from .errors import ApiError
from .imagelinks import fetch_links
from .policy import SecurityPolicy

MAX_REQUEST_IMAGES = 16  # images in one request, every message's together (a chat sends its images again each turn)
MAX_REQUEST_PIXELS = 2 * MAX_PIXELS  # two 4096x4096 images: 96 MiB of RGB; projectors resize to under 2k a side
# Decoding runs on threads of its own, not the server's pool of 40: each thread that decodes a big image
# keeps its own malloc arena of freed pixels, so decoding on any of 40 threads let the server keep growing
# (a 10-minute fuzzing run: +186 MB from images alone); two threads bound that, and decode two at once
_DECODERS = ThreadPoolExecutor(2, thread_name_prefix="fireside-images")


def files_in(req: ChatRequest) -> list[dict[str, Any]]:
    return [p for m in req.messages if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == FILE_PART]


def weigh(files: list[ImageFile]) -> None:
    """A 413 when ``files`` are more images or pixels than one request may carry."""
    pixels = sum(f.pixels for f in files)
    if len(files) > MAX_REQUEST_IMAGES or pixels > MAX_REQUEST_PIXELS:
        raise ApiError(f"messages: the request carries {len(files)} images of {pixels:,} pixels in all; a request may "
                       f"carry up to {MAX_REQUEST_IMAGES} images and {MAX_REQUEST_PIXELS:,} pixels (two 4096x4096 "
                       "images). Send fewer or smaller images: a model's vision projector resizes each to under "
                       "2,048 pixels a side anyway", 413, "request_too_large", "messages")


async def decoded(policy: SecurityPolicy, req: ChatRequest) -> ChatRequest:
    """``req`` with its links fetched and every image file decoded into an ``Image`` part, on a worker
    thread, once the whole request is known to be within the budget; ``req`` itself when it has none."""
    req = await fetch_links(policy, req)
    parts = files_in(req)
    if not parts:
        return req
    weigh([p["file"] for p in parts])
    images = await asyncio.get_running_loop().run_in_executor(
        _DECODERS, lambda: [p["file"].decode().part() for p in parts])
    done = {id(part): image for part, image in zip(parts, images)}
    messages = [dict(m, content=[done.get(id(p), p) for p in m["content"]]) if isinstance(m.get("content"), list)
                else m for m in req.messages]
    return replace(req, messages=messages)
