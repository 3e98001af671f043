"""Images through every API dialect, with the official clients, on the tiny vision pair in a library of
its own: OpenAI chat ``image_url`` (data URLs), Responses ``input_image``, Anthropic ``image`` blocks and
Ollama ``images`` all reach the model as the same image, count its tokens in usage, and give
llama-cpp-python's ``MTMDChatHandler`` greedy reply; bad images are a 400 that names the problem, and the
runner goes on serving; a text-only model says it cannot see and names the model that can."""

from __future__ import annotations

import base64
import io
import os
import struct
import zlib

import anthropic
import ollama
import openai
import pytest

from fireside.engine.library import Library
from fireside.engine.prompts.images import decode_image
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.vision_model import IMAGE_TOKENS, data_url, image_bytes, oracle_replies

pytestmark = pytest.mark.model

QUESTION = "What is in this picture?"
PNG, JPEG, BMP = image_bytes(1), image_bytes(3, (640, 480), "JPEG"), image_bytes(2, (200, 120), "BMP")


@pytest.fixture(scope="module")
def served(vision_pair, tmp_path_factory, smollm2_path):
    thread, model, rt = serve(tmp_path_factory.mktemp("vision-server"), "Tiny-Vision-GGUF", vision_pair)
    yield thread.url, model, rt
    thread.stop()
    rt.close()


def serve(home, folder_name: str, pair) -> tuple[ServerThread, str, Runtime]:
    """A server on a library of the starter and ``pair`` (in ``local/folder_name``); returns it, the pair's
    model id and its runtime."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(home)})
    settings.ensure_dirs()
    folder = settings.models_dir / "local" / folder_name
    folder.mkdir(parents=True)
    for path in pair:
        os.link(path, folder / path.name)
    library = Library(settings)
    [model] = [m for m in library.list() if m.source not in ("starter", "builtin")]
    assert model.projector == folder / pair[1].name  # paired by its header
    rt = Runtime(settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0)
    thread = ServerThread(create_app(rt, settings, library), "127.0.0.1", 0)
    thread.start()
    return thread, model.id, rt


def clients(url: str):
    return (openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0),
            anthropic.Anthropic(base_url=url, api_key="x", max_retries=0), ollama.Client(host=url))


def direct(rt: Runtime, model: str, data: bytes, **sampling) -> str:
    messages = [{"role": "user", "content": [{"type": "text", "text": QUESTION}, decode_image(data).part()]}]
    chunks = list(rt.chat(model, ChatRequest(messages, Sampling(temperature=0.0, max_tokens=12, **sampling))))
    return "".join(c.text for c in chunks if c.kind == "text")


@pytest.mark.parametrize("data,media_type", [(PNG, "image/png"), (JPEG, "image/jpeg"), (BMP, "image/bmp")],
                         ids=["png-48x40", "jpeg-640x480", "bmp-200x120"])
def test_every_dialect_reads_the_image(served, vision_pair, data, media_type):
    url, model, rt = served
    oai, claude, oll = clients(url)
    chat = oai.chat.completions.create(model=model, temperature=0, max_tokens=12, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                     {"type": "image_url", "image_url": {"url": data_url(data, media_type)}}]}])
    resp = oai.responses.create(model=model, temperature=0, max_output_tokens=12, input=[
        {"role": "user", "content": [{"type": "input_text", "text": QUESTION},
                                     {"type": "input_image", "image_url": data_url(data, media_type)}]}])
    msg = claude.messages.create(model=model, max_tokens=12, extra_body={"temperature": 0}, messages=[
        {"role": "user", "content": [{"type": "text", "text": QUESTION}, {"type": "image", "source": {
            "type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}}]}])
    want = direct(rt, model, data)  # the dialects' sampling: greedy, llama.cpp's default repeat penalty
    assert chat.choices[0].message.content == resp.output_text == msg.content[0].text == want
    assert chat.usage.prompt_tokens > IMAGE_TOKENS and msg.usage.input_tokens + (msg.usage.cache_read_input_tokens or 0) \
        == chat.usage.prompt_tokens  # the image's tokens are counted
    # Ollama puts its images before the text; with its repeat penalty off, MTMDChatHandler's reply
    r = oll.chat(model=model, options={"temperature": 0, "num_predict": 12, "repeat_penalty": 1.0},
                 messages=[{"role": "user", "content": QUESTION, "images": [data]}])
    [oracle] = oracle_replies(*vision_pair, [[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(data, media_type)}}, {"type": "text", "text": QUESTION}]}]])
    assert r.message.content == oracle and r.prompt_eval_count is not None
    g = oll.generate(model=model, prompt=QUESTION, images=[data], options={"temperature": 0, "num_predict": 12,
                                                                           "repeat_penalty": 1.0})
    assert g.response == oracle


def test_a_text_only_model_says_it_cannot_see_and_names_one_that_can(served):
    url, model, _ = served
    oai = clients(url)[0]
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model="starter", max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": data_url(PNG)}}]}])
    assert "cannot see images" in refused.value.message and "tiny-vision:f16" in refused.value.message  # its alias
    assert refused.value.code == "model_cannot_see_images"


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims ``width`` x ``height`` (a decompression bomb's header) with almost no data."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")


def _animated_gif() -> bytes:
    from PIL import Image

    frames = [Image.open(io.BytesIO(image_bytes(s))).convert("P") for s in (1, 2)]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return buf.getvalue()


BAD = [
    ("truncated PNG", PNG[: len(PNG) // 2], "image/png", "truncated or corrupt"),
    ("corrupt JPEG", JPEG[:200] + bytes(200) + JPEG[400:600], "image/jpeg", "truncated or corrupt"),
    ("not a PNG", b"plain text pretending to be a picture" * 4, "image/png", "not an image"),
    ("a JPEG said to be a PNG", JPEG, "image/png", "the bytes are image/jpeg"),
    ("SVG", b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>',
     "image/svg+xml", "SVG images are not read"),
    ("bomb", _png_header_only(30000, 30000), "image/png", "pixels"),
]


@pytest.mark.parametrize("name,data,media_type,says", BAD, ids=[b[0] for b in BAD])
def test_a_bad_image_is_a_400_and_the_runner_goes_on(served, name, data, media_type, says):
    url, model, rt = served
    oai, claude, oll = clients(url)
    with pytest.raises(openai.BadRequestError) as refused:
        oai.chat.completions.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "text", "text": QUESTION}, {"type": "image_url", "image_url": {"url": data_url(data, media_type)}}]}])
    assert says in refused.value.message and refused.value.code == "invalid_image"
    with pytest.raises(anthropic.BadRequestError, match=says):
        claude.messages.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": media_type,
                                         "data": base64.b64encode(data).decode()}}]}])
    # the same runner still answers an image
    assert oai.chat.completions.create(model=model, max_tokens=4, messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url(PNG)}}]}]).choices[0].message.content


def test_an_animated_image_is_read_as_its_first_frame(served):
    url, model, rt = served
    oai = clients(url)[0]

    def ask(data: bytes, media_type: str) -> str:
        return oai.chat.completions.create(model=model, temperature=0, max_tokens=12, messages=[
            {"role": "user", "content": [{"type": "text", "text": QUESTION},
                                         {"type": "image_url", "image_url": {"url": data_url(data, media_type)}}]}]
        ).choices[0].message.content

    gif = _animated_gif()
    from PIL import Image

    first = io.BytesIO()
    Image.open(io.BytesIO(gif)).convert("RGB").save(first, "PNG")  # frame one, as a still
    assert ask(gif, "image/gif") == ask(first.getvalue(), "image/png")


def test_the_engine_facade_is_the_apps_door_to_images(served):
    from fireside.engine.errors import ImageRejected
    from fireside.engine.facade import Engine

    _, model, rt = served
    engine = Engine.of(rt)
    assert engine.can_see(model) and not engine.can_see("starter")
    assert engine.vision_models() == ["tiny-vision:f16"]
    image = engine.decode_image(JPEG, "image/jpeg")
    assert (image.width, image.height, image.media_type) == (640, 480, "image/jpeg") and len(image.digest) == 64
    assert engine.decode_image(JPEG).digest == image.digest  # the pixels are the identity
    with pytest.raises(ImageRejected):
        engine.decode_image(b"<svg/>", "image/svg+xml")
    chunks = list(engine.chat(model, ChatRequest([{"role": "user", "content": [
        {"type": "text", "text": QUESTION}, image.part()]}], Sampling(temperature=0.0, max_tokens=12))))
    assert "".join(c.text for c in chunks if c.kind == "text") == direct(rt, model, JPEG)


def test_an_mrope_pair_gets_the_oracles_reply_and_counts_what_it_bills(mrope_pair, tmp_path):
    """A library pairs the projector by its header; Ollama's client (repeat penalty off, as the oracle)
    gets the oracle's reply for a tall image, and Anthropic's ``count_tokens`` counts what OpenAI's
    ``usage`` bills for the same message: every embedding of the image."""
    from tests.helpers.vision_model import mrope_image_tokens

    image_2 = image_bytes(13, (40, 120))  # a tall image: a 3x8 grid, 24 embeddings in 8 positions
    thread, model, rt = serve(tmp_path, "Tiny-MRoPE-GGUF", mrope_pair)
    try:
        url, image = thread.url, data_url(image_2)
        seen = ollama.Client(host=url).chat(model=model, options={"temperature": 0, "num_predict": 12,
                                                                     "repeat_penalty": 1.0},
                                            messages=[{"role": "user", "content": QUESTION, "images": [image_2]}])
        chat = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0).chat.completions.create(
            model=model, max_tokens=4, temperature=0.0,
            messages=[{"role": "user", "content": [{"type": "text", "text": QUESTION},
                                                   {"type": "image_url", "image_url": {"url": image}}]}])
        counted = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0).messages.count_tokens(
            model=model, messages=[{"role": "user", "content": [
                {"type": "text", "text": QUESTION},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": image.split(",", 1)[1]}}]}]).input_tokens
    finally:
        thread.stop()
        rt.close()
    [want] = oracle_replies(*mrope_pair, [[{"role": "user", "content": [  # Ollama puts images before the text
        {"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": QUESTION}]}]])
    assert seen.message.content == want
    assert counted == chat.usage.prompt_tokens > mrope_image_tokens(40, 120)[0]
