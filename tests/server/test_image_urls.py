"""Images named by http(s) URL (issue 29, ``--allow-image-urls``): off by default, a 400 that says how to
send the image; on, the server fetches it (OpenAI ``image_url``, Anthropic ``source.url``) and the reply
is the one for the same image sent inline. What cannot be fetched or read is a 400 naming the part: a
404, a body past the size cap (sent with no length), a server too slow, a page that is not an image.
The images come from an HTTP server on loopback; nothing else is reached."""

from __future__ import annotations

import http.server
import threading
import time

import anthropic
import openai
import pytest

from fireside.engine.server import SecurityPolicy, ServerThread, create_app, imagelinks
from tests.helpers.vision_model import data_url, image_bytes
from tests.server.test_vision import QUESTION, served  # noqa: F401  (the tiny vision pair's server)

pytestmark = pytest.mark.model
PNG = image_bytes(5, (64, 48))


class _Images(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path == "/cat.png":
            self._send(PNG, "image/png")
        elif self.path == "/page":
            self._send(b"<html>not a picture</html>", "text/html")
        elif self.path == "/slow.png":
            time.sleep(3)
            self._send(PNG, "image/png")
        elif self.path == "/endless.png":  # no Content-Length: read until the cap
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            try:
                for _ in range(4096):
                    self.wfile.write(b"\0" * 65536)
            except OSError:
                pass  # the server hung up at the cap
        else:
            self.send_error(404)

    def _send(self, body: bytes, media_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def images():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def fetching(served):  # noqa: F811
    """A second server over the same runtime, started to fetch image URLs."""
    _, model, rt = served
    thread = ServerThread(create_app(rt, rt.settings, policy=SecurityPolicy(allow_image_urls=True)), "127.0.0.1", 0)
    thread.start()
    yield thread.url, model
    thread.stop()


def _ask(url: str, model: str, image_url: str):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    return client.chat.completions.create(model=model, temperature=0, max_tokens=12, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "image_url", "image_url": {"url": image_url}}]}])


def test_image_urls_are_refused_unless_the_server_fetches_them(served, images):  # noqa: F811
    url, model, _ = served
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(url, model, f"{images}/cat.png")
    assert "--allow-image-urls" in refused.value.message and "messages[0].content[1]" in refused.value.message


def test_a_fetched_image_gives_the_reply_of_the_same_image_inline(fetching, images):
    url, model = fetching
    inline = _ask(url, model, data_url(PNG)).choices[0].message.content
    assert _ask(url, model, f"{images}/cat.png").choices[0].message.content == inline
    claude = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0)
    msg = claude.messages.create(model=model, max_tokens=12, extra_body={"temperature": 0}, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "image", "source": {"type": "url", "url": f"{images}/cat.png"}}]}])
    assert msg.content[0].text == inline


@pytest.mark.parametrize("path,said", [("/missing.png", "HTTP 404"), ("/endless.png", "is over 20,971,520 bytes"),
                                       ("/slow.png", "took more than 1 s"), ("/page", "not an image")])
def test_an_image_that_cannot_be_fetched_or_read_is_a_400_naming_it(fetching, images, monkeypatch, path, said):
    monkeypatch.setattr(imagelinks, "FETCH_S", 1.0)
    url, model = fetching
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(url, model, f"{images}{path}")
    assert said in refused.value.message and "messages[0].content[1]" in refused.value.message, refused.value.message
    assert refused.value.code == "invalid_image"
