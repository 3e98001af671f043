"""The Ollama dialect through the official ``ollama`` package, against the real server and SmolLM2."""

from __future__ import annotations

import json

import httpx
import ollama
import pytest

from tests.helpers.driving import API_KEY

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def client(base_url):
    return ollama.Client(host=base_url)


def test_whole_chat_reply(client):
    r = client.chat(model="starter", messages=HI, options={"num_predict": 5, "seed": 1}, stream=False)
    assert r.done and r.done_reason == "length"
    assert r.message.role == "assistant" and r.message.content
    assert r.eval_count == 5 and r.prompt_eval_count > 0


def test_streamed_chat_is_ndjson_matching_the_whole_reply(client):
    whole = client.chat(model="starter", messages=HI, options={"num_predict": 5, "seed": 2}, stream=False)
    parts = list(client.chat(model="starter", messages=HI, options={"num_predict": 5, "seed": 2}, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert [p.done for p in parts].count(True) == 1 and parts[-1].done


def test_generate_streams_ndjson(base_url):
    body = {"model": "starter", "prompt": "Name a colour.", "options": {"num_predict": 4}}
    with httpx.stream("POST", f"{base_url}/api/generate", json=body, timeout=60) as r:
        assert r.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in r.iter_lines() if line]
    assert all("response" in line for line in lines) and lines[-1]["done"] is True
    # sampled (no seed): the reply may end on its own before the cap, and then it says so
    last = lines[-1]
    assert 1 <= last["eval_count"] <= 4 and last["done_reason"] == ("length" if last["eval_count"] == 4 else "stop")
    assert len([line for line in lines[:-1] if line["response"]]) <= last["eval_count"]


def test_generate_whole_and_raw(client):
    r = client.generate(model="starter", prompt="Name a colour.", options={"num_predict": 3}, stream=False)
    assert r.done and r.response
    raw = client.generate(model="starter", prompt="Roses are red, violets are", raw=True,
                          options={"num_predict": 3, "seed": 1})
    assert raw.response


def test_format_schema_reply_validates(client):
    schema = {"type": "object", "properties": {"colour": {"type": "string"}}, "required": ["colour"]}
    r = client.chat(model="starter", messages=[{"role": "user", "content": "Pick a colour."}], format=schema,
                    options={"num_predict": 40, "seed": 1})
    assert isinstance(json.loads(r.message.content)["colour"], str)


def test_tags_show_ps_version(client, library, runtime):
    tags = client.list()
    assert [m.model for m in tags.models] == [m.id for m in library.list()]
    starter = next(m for m in tags.models if m.model == "starter")
    assert starter.details.format == "gguf" and starter.size > 0
    shown = client.show("starter")
    assert shown.details.family == "llama" and "{%" in shown.template
    runtime.load("starter")
    assert "starter" in [m.model for m in client.ps().models]
    assert httpx.get(f"{client._client.base_url}/api/version").json()["version"]


def test_embed_shape(client):
    r = client.embed(model="starter", input=["one", "two"])
    assert len(r.embeddings) == 2 and {len(v) for v in r.embeddings} == {576}


def test_unknown_model_is_404_in_ollama_shape(client):
    with pytest.raises(ollama.ResponseError) as err:
        client.chat(model="no-such-model", messages=HI)
    assert err.value.status_code == 404 and "no-such-model" in err.value.error


def test_pull_streams_progress_and_delete_removes(keyed_server, library):
    client = ollama.Client(host=keyed_server.url, headers={"Authorization": f"Bearer {API_KEY}"})
    progress = list(client.pull("fake/pulled:Q8_0", stream=True))
    assert progress[0].status == "pulling manifest" and progress[-1].status == "success"
    assert [p.completed for p in progress if p.completed is not None] == [0, 512, 1024]
    model_id = next(m.id for m in library.list() if m.id.startswith("fake/pulled"))
    assert client.show(model_id).modelfile  # the server now remembers the name for a moment...
    client.delete(model_id)
    assert model_id not in [m.id for m in library.list()]
    with pytest.raises(ollama.ResponseError) as err:
        client.show(model_id)  # ...and forgets it with the delete: the model is gone at once
    assert err.value.status_code == 404
    with pytest.raises(ollama.ResponseError) as err:
        client.delete(model_id)
    assert err.value.status_code == 404
