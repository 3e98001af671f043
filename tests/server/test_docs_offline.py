"""The API's interactive docs are served by Fireside itself: no page names an outside host.

A local app must work offline, and its first screen says nothing typed leaves the computer, so /docs
and /redoc load Swagger UI, ReDoc and the icon from the server (fastapi-offline's assets), not a CDN.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

URL = re.compile(r"""(?:src|href|url)\s*[:=(]\s*['"]?([^'"\s)>]+)|['"](https?://[^'"\s]+)['"]""")


def referenced(page: str) -> list[str]:
    return [a or b for a, b in URL.findall(page)]


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_pages_load_everything_from_the_server(base_url, path):
    page = httpx.get(base_url + path)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    refs = referenced(page.text)
    assert any(r.endswith(".js") for r in refs), refs  # the page does load its script
    for ref in refs:
        url = urljoin(base_url + path, ref)
        assert urlsplit(url).hostname == "127.0.0.1", f"{path} references {ref}"
        assert httpx.get(url).status_code == 200, url
    if path == "/docs":
        assert '"validatorUrl": null' in page.text  # else Swagger UI's validator badge calls validator.swagger.io


def test_no_outside_host_in_the_docs_or_the_schema(base_url):
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        text = httpx.get(base_url + path).text
        hosts = {urlsplit(u).hostname for u in re.findall(r"https?://[^\s'\"<>)]+", text)}
        assert hosts <= {"127.0.0.1", "localhost"}, (path, hosts)
