"""Images named by http(s) URL: fetched by the server only when it was started to (``--allow-image-urls``).

A dialect turns an image part whose URL is http(s) into a link part (``inbound.image_of``); ``fetch_links``
runs in the shared handler, before the request reaches the engine. With the policy's
``allow_image_urls`` off (the default) a link is a 400 that says how to send the image instead: a
server that fetches whatever URL a client names can be made to reach the network behind it (the
machine's other services, a LAN). On, each link is fetched with ``httpx`` at most ``FETCH_S`` seconds
and ``MAX_IMAGE_BYTES`` bytes (read as it streams: a body that says nothing of its size, or lies,
is cut at the cap), following at most ``MAX_REDIRECTS`` redirects, http(s) only, and checked, weighed
and decoded like inline data (``imagebudget.py``). Every failure is a 400 naming the part and why.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
from starlette.concurrency import run_in_threadpool

from ..prompts import MAX_IMAGE_BYTES, probe_image
from ..types import ChatRequest
from .errors import ApiError
from .inbound import LINK_PART
from .policy import SecurityPolicy

FETCH_S = 10.0  # seconds for one image: connecting, and the whole body
MAX_REDIRECTS = 3


def links_in(req: ChatRequest) -> list[dict[str, Any]]:
    return [p for m in req.messages if isinstance(m.get("content"), list)
            for p in m["content"] if isinstance(p, dict) and p.get("type") == LINK_PART]


async def fetch_links(policy: SecurityPolicy, req: ChatRequest) -> ChatRequest:
    """``req`` with every link part replaced by its image file, fetched (all at once) and its header
    checked (``imagebudget.decoded`` decodes it); ``req`` itself when it has none. A 400 when the server
    does not fetch images or one cannot be fetched or read."""
    links = links_in(req)
    if not links:
        return req
    if not policy.allow_image_urls:
        raise ApiError(f"{links[0]['where']}: this server does not fetch images from http(s) URLs (start it with "
                       "--allow-image-urls to let it); send the image inline as a data: URL (base64)",
                       param="messages", code="invalid_image")
    async with httpx.AsyncClient(timeout=FETCH_S, follow_redirects=True, max_redirects=MAX_REDIRECTS) as client:
        images = await asyncio.gather(*(_fetch(client, link) for link in links))
    fetched = {id(link): image.part() for link, image in zip(links, images)}
    messages = [dict(m, content=[fetched.get(id(p), p) for p in m["content"]]) if isinstance(m.get("content"), list)
                else m for m in req.messages]
    return replace(req, messages=messages)


async def _fetch(client: httpx.AsyncClient, link: dict[str, Any]):
    url, where = link["url"], link["where"]
    try:
        data, media_type = await asyncio.wait_for(_download(client, url, where), FETCH_S)
    except asyncio.TimeoutError:
        raise ApiError(f"{where}: the image at {url} took more than {FETCH_S:g} s to fetch", param="messages",
                       code="invalid_image") from None
    except httpx.HTTPError as exc:
        raise ApiError(f"{where}: could not fetch the image at {url}: {exc or type(exc).__name__}",
                       param="messages", code="invalid_image") from None
    return await run_in_threadpool(probe_image, data, media_type, where)  # decoded within the budget


async def _download(client: httpx.AsyncClient, url: str, where: str) -> tuple[bytes, str | None]:
    async with client.stream("GET", url) as response:
        if response.status_code != 200:
            raise ApiError(f"{where}: could not fetch the image at {url}: HTTP {response.status_code}",
                           param="messages", code="invalid_image")
        data = bytearray()
        async for piece in response.aiter_bytes():
            data += piece
            if len(data) > MAX_IMAGE_BYTES:
                raise ApiError(f"{where}: the image at {url} is over {MAX_IMAGE_BYTES:,} bytes",
                               param="messages", code="invalid_image")
        return bytes(data), response.headers.get("content-type", "").split(";")[0].strip() or None
