"""A hostile GGUF header and a FIFO named ``*.gguf`` in the models folder: the real server over the real
SmolLM2 keeps listing and serving every other model (issue 17: both used to take every route down)."""

from __future__ import annotations

import os

import httpx
import openai
import pytest

from fireside.engine.library import Library
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.gguf_builder import U64, build_gguf, llama_kv, raw_gguf

pytestmark = pytest.mark.model
GOOD = "pub/Good-GGUF/Good-Q8_0"


@pytest.fixture(scope="module")
def bad_folder_server(tmp_path_factory, runtime):
    """A server whose library holds a good model, a 2**40 block-count bomb and (where the platform has
    them) a FIFO, beside the shared runtime."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("bad-files-home"))})
    settings.ensure_dirs()
    build_gguf(settings.models_dir / f"{GOOD}.gguf")
    bomb = settings.models_dir / "evil/Bomb-GGUF/Bomb-Q4_0.gguf"
    bomb.parent.mkdir(parents=True)
    bomb.write_bytes(raw_gguf(llama_kv(2**40, U64)))
    if hasattr(os, "mkfifo"):
        os.mkfifo(settings.models_dir / "evil/Bomb-GGUF/Pipe-Q4_0.gguf")
    thread = ServerThread(create_app(runtime, settings, Library(settings)), "127.0.0.1", 0)
    thread.start()
    yield thread.url
    thread.stop()


def test_model_lists_answer_with_the_good_models(bad_folder_server):
    with httpx.Client(base_url=bad_folder_server, timeout=30) as client:
        models = client.get("/v1/models")
        tags = client.get("/api/tags")
    assert models.status_code == 200 and tags.status_code == 200
    assert [m["id"] for m in models.json()["data"]] == ["starter", GOOD, "minilm"]  # minilm: the built-in embedder
    assert [m["model"] for m in tags.json()["models"]] == ["starter", GOOD, "minilm"]


def test_chat_with_another_model_still_works(bad_folder_server):
    client = openai.OpenAI(base_url=f"{bad_folder_server}/v1", api_key="unused", timeout=60, max_retries=0)
    reply = client.chat.completions.create(model="starter", messages=[{"role": "user", "content": "Hi"}],
                                           max_tokens=4, seed=1)
    assert reply.choices[0].message.content


def test_the_bad_file_is_a_404_that_says_why(bad_folder_server):
    r = httpx.post(f"{bad_folder_server}/v1/chat/completions", timeout=30, json={
        "model": "evil/Bomb-GGUF/Bomb-Q4_0", "messages": [{"role": "user", "content": "Hi"}]})
    assert r.status_code == 404
    assert "cannot be used" in r.json()["error"]["message"] and "block_count" in r.json()["error"]["message"]
