"""Remote engines end to end: a second Fireside server on loopback (the real SmolLM2, behind a key) is
added as a remote to a first one, and its model is used through the first one's OpenAI, Ollama and
Anthropic endpoints with the official client packages, and through ``fireside remote``/``fireside run``.
Greedy decoding (temperature 0) makes every route give the same text as asking the remote directly.
"""

from __future__ import annotations

import time

import anthropic
import ollama
import openai
import pytest

from fireside.engine.cli import main
from fireside.engine.facade import Engine
from fireside.engine.remote import RemoteEngine, RemoteRegistry
from fireside.engine.server import SecurityPolicy, ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.keyrings import DictKeys
from tests.helpers.waiting import closed_port_url

pytestmark = pytest.mark.model
REMOTE_KEY = "remote-key-0123456789"
MODEL = "remote/second/starter"
HI = [{"role": "user", "content": "Say hello."}]


@pytest.fixture(scope="module")
def remote(runtime, server_settings, library):
    """The "remote" engine: a second Fireside server over the session's runtime, behind a key."""
    thread = ServerThread(create_app(runtime, server_settings, library, policy=SecurityPolicy(api_key=REMOTE_KEY)),
                          "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def front(remote, library, tmp_path_factory):
    """The first Fireside server, with the remote added (as "second") and a dead one (as "dead")."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("front-home"))})
    settings.ensure_dirs()
    registry = RemoteRegistry(settings, keys=DictKeys())
    registry.add("second", f"{remote.url}/v1", REMOTE_KEY)
    registry.add("dead", closed_port_url())
    rt = Engine(settings, resolver=lambda ref: library.get(ref).path, remotes=RemoteEngine(settings, registry))
    thread = ServerThread(create_app(rt, settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread
    thread.stop()
    rt.close()


@pytest.fixture(scope="module")
def direct_text(remote) -> str:
    """The reply the remote gives when asked directly: what every forwarded route must give too."""
    client = openai.OpenAI(base_url=f"{remote.url}/v1", api_key=REMOTE_KEY, max_retries=0)
    r = client.chat.completions.create(model="starter", messages=HI, max_tokens=4, temperature=0)
    assert r.usage.completion_tokens == 4
    return r.choices[0].message.content


@pytest.fixture(scope="module")
def oai(front):
    return openai.OpenAI(base_url=f"{front.url}/v1", api_key="unused", max_retries=0)


def test_remote_models_are_listed_beside_local_ones_without_waiting_on_the_dead(front, oai, library):
    start = time.monotonic()
    models = list(oai.models.list())
    assert time.monotonic() - start < 8.0  # the dead remote costs a refused connection, not a hang
    local = [m.id for m in library.list()]
    assert [m.id for m in models][:len(local)] == local and MODEL in [m.id for m in models][len(local):]
    assert all(m.owned_by == "remote:second" for m in models[len(local):])  # the remote's, after the local ones
    tags = [m.model for m in ollama.Client(host=front.url).list().models]
    assert MODEL in tags and "starter" in tags


def test_openai_chat_through_the_remote(oai, direct_text):
    r = oai.chat.completions.create(model=MODEL, messages=HI, max_tokens=4, temperature=0)
    assert r.choices[0].message.content == direct_text
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 4 and r.usage.prompt_tokens > 0
    events = list(oai.chat.completions.create(model=MODEL, messages=HI, max_tokens=4, temperature=0, stream=True,
                                              stream_options={"include_usage": True}))
    assert "".join(e.choices[0].delta.content or "" for e in events if e.choices) == direct_text
    assert events[-1].usage.completion_tokens == 4


def test_ollama_chat_through_the_remote(front, direct_text):
    client = ollama.Client(host=front.url)
    options = {"num_predict": 4, "temperature": 0}
    r = client.chat(model=MODEL, messages=HI, options=options, stream=False)
    assert r.message.content == direct_text and r.eval_count == 4 and r.done_reason == "length"
    parts = list(client.chat(model=MODEL, messages=HI, options=options, stream=True))
    assert "".join(p.message.content for p in parts) == direct_text and parts[-1].done


def test_anthropic_messages_through_the_remote(front, direct_text):
    client = anthropic.Anthropic(base_url=front.url, api_key="unused", max_retries=0)
    r = client.messages.create(model=MODEL, max_tokens=4, messages=HI, extra_body={"temperature": 0})
    assert r.content[0].text == direct_text
    assert r.stop_reason == "max_tokens" and r.usage.output_tokens == 4
    with client.messages.stream(model=MODEL, max_tokens=4, messages=HI, extra_body={"temperature": 0}) as stream:
        assert "".join(stream.text_stream) == direct_text


def test_unreachable_remote_is_a_clear_error_in_every_dialect(front, oai):
    start = time.monotonic()
    with pytest.raises(openai.InternalServerError, match="remote engine 'dead' at .* cannot be reached"):
        oai.chat.completions.create(model="remote/dead/any", messages=HI, max_tokens=2)
    with pytest.raises(ollama.ResponseError, match="cannot be reached"):
        ollama.Client(host=front.url).chat(model="remote/dead/any", messages=HI, stream=False)
    with pytest.raises(anthropic.InternalServerError, match="cannot be reached"):
        anthropic.Anthropic(base_url=front.url, api_key="unused", max_retries=0).messages.create(
            model="remote/dead/any", max_tokens=2, messages=HI)
    assert time.monotonic() - start < 10.0
    with pytest.raises(openai.NotFoundError, match="no remote engine named 'nowhere'"):
        oai.chat.completions.create(model="remote/nowhere/any", messages=HI, max_tokens=2)
    with pytest.raises(openai.NotFoundError, match="has no model 'missing'"):
        oai.chat.completions.create(model="remote/second/missing", messages=HI, max_tokens=2)


def test_local_models_still_answer_beside_a_dead_remote(oai):
    r = oai.chat.completions.create(model="starter", messages=HI, max_tokens=2, temperature=0)
    assert r.usage.completion_tokens == 2 and r.choices[0].message.content


def test_cli_adds_lists_uses_and_removes_a_remote(remote, direct_text, memory_keyring, capsys, monkeypatch):
    assert main(["remote", "add", "second", remote.url, "--api-key", REMOTE_KEY]) == 0
    assert "added remote second" in capsys.readouterr().out
    assert ("Fireside remote engines", "second") in memory_keyring.store  # the key is in the keyring...
    assert main(["remote", "ls"]) == 0
    listing = capsys.readouterr().out
    assert MODEL in listing and REMOTE_KEY not in listing  # ...and shown nowhere
    assert main(["run", MODEL, "Say hello.", "--max-tokens", "4", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.strip() == direct_text.strip()
    assert main(["remote", "rm", "second"]) == 0
    assert memory_keyring.store == {}
    assert main(["run", MODEL, "Say hello."]) == 1
    assert "no remote engine named 'second'" in capsys.readouterr().err


def test_a_remote_without_its_key_says_so(remote, capsys):
    assert main(["remote", "add", "keyless", remote.url]) == 0
    out = capsys.readouterr().out
    assert "not answering" in out and "refused the request (HTTP 401" in out
    assert main(["run", "remote/keyless/starter", "Say hello."]) == 1
    assert "set its key with `fireside remote add keyless URL --api-key KEY`" in capsys.readouterr().err


def test_anthropic_count_tokens_through_the_remote(front, remote):
    """The remote is asked (a one-token reply's usage): the count is the remote's own, which for the same
    model behind it is the count the remote gives for its local model."""
    messages = [{"role": "user", "content": "Count these few words, please."}]
    through = anthropic.Anthropic(base_url=front.url, api_key="unused", max_retries=0)
    direct = anthropic.Anthropic(base_url=remote.url, api_key=REMOTE_KEY, max_retries=0)
    counted = through.messages.count_tokens(model=MODEL, messages=messages).input_tokens
    assert counted == direct.messages.count_tokens(model="starter", messages=messages).input_tokens > 0
