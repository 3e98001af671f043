"""Read a hub file's GGUF header with HTTP Range requests, so its fit is known before any download.

``fetch_info(client, urls, ...)`` asks for the first ``probe`` bytes of each file (each part of a split
set), parses them, and when the header runs on (``HeaderIncomplete`` says how far) asks for the rest,
up to ``cap`` bytes. A server that ignores Range and starts sending the whole file is read only as far
as needed and then hung up on. The result is the same ``ModelInfo`` ``inspect_file`` gives for a file
on disk, minus the extent checks, and feeds the fit planner.
"""

from __future__ import annotations

import httpx

from ..errors import HeaderIncomplete, HubError, InvalidModelFile
from ..models import ModelInfo, inspection
from .downloads import raise_for_hub_status

PROBE = 2 * 1024 * 1024  # real headers are a few MB at most (vocabularies); most fit in one request
CAP = 64 * 1024 * 1024


def fetch_range(client: httpx.Client, url: str, start: int, end: int, auth: httpx.Auth | None) -> bytes:
    """Bytes ``start..end`` (inclusive) of ``url``; at most that many even if Range is ignored."""
    want = end - start + 1
    headers = {"Range": f"bytes={start}-{end}"}
    try:
        with client.stream("GET", url, headers=headers, auth=auth or httpx.USE_CLIENT_DEFAULT) as r:
            if r.status_code not in (200, 206):
                r.read()
                raise_for_hub_status(r, url)
            skip = start if r.status_code == 200 else 0
            buf = bytearray()
            for chunk in r.iter_bytes(256 * 1024):
                buf += chunk
                if len(buf) >= skip + want:
                    break
            return bytes(buf[skip:skip + want])
    except httpx.HTTPError as exc:
        raise HubError(f"cannot read the header of {url}: {exc}") from exc


def fetch_info(client: httpx.Client, urls: list[str], names: list[str], total_size: int,
               auth: httpx.Auth | None = None, probe: int = PROBE, cap: int = CAP) -> ModelInfo:
    """Inspect a hub model (every part of a split set) from its headers alone."""
    headers = [_fetch_header(client, url, name, i, auth, probe, cap)
               for i, (url, name) in enumerate(zip(urls, names))]
    info = inspection.summarize_headers(names[0], total_size, headers)
    info.split_files = list(names) if len(names) > 1 else []
    return info


def fetch_header(client: httpx.Client, url: str, name: str, auth: httpx.Auth | None = None, probe: int = PROBE,
                 cap: int = CAP) -> inspection.Header:
    """One file's parsed header (a vision projector's, say), fetched with Range requests."""
    return _fetch_header(client, url, name, 0, auth, probe, cap)


def _fetch_header(client: httpx.Client, url: str, name: str, index: int, auth: httpx.Auth | None,
                  probe: int, cap: int) -> inspection.Header:
    data = fetch_range(client, url, 0, probe - 1, auth)
    while True:
        try:
            return inspection.read_header(data, name, index)
        except HeaderIncomplete as exc:
            if len(data) < probe and len(data) < exc.needed:
                raise InvalidModelFile(f"{name}: the file ends inside its header") from exc
            if exc.needed > cap:
                raise InvalidModelFile(f"{name}: its header runs past {cap // 2**20} MiB; "
                                       f"Fireside does not read headers that large") from exc
            end = min(cap, max(exc.needed, len(data) * 2)) - 1
            more = fetch_range(client, url, len(data), end, auth)
            if not more:
                raise InvalidModelFile(f"{name}: the file ends inside its header") from exc
            data += more
