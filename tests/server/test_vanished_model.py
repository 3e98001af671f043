"""A model whose file goes from the folder between the server resolving its name and using it is gone:
every route answers 404, never a 500.

The server remembers a name the library answered (``context.RESOLVED_S``) while its file is the one
the library saw; a file deleted by hand is noticed on the next request, and one deleted between that
check and the use is the race ``entry`` and the runtime's load answer (``/api/show`` once answered 500
there: ``RuntimeError: coroutine raised StopIteration``). The runtime here resolves names to the path
they had, as a load that started just before the delete would.
"""

from __future__ import annotations

import anthropic
import ollama
import openai
import pytest

from fireside.engine.library import Library
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app
from fireside.engine.settings import Settings
from tests.helpers.gguf_builder import build_gguf

NAME = "pub/Gone-GGUF/Gone-Q8_0"


@pytest.fixture
def gone(tmp_path):
    """(server URL, the model's file): a server over a library that holds one tiny model."""
    settings = Settings.from_env({"FIRESIDE_HOME": str(tmp_path / "home")})
    settings.ensure_dirs()
    path = build_gguf(settings.models_dir / f"{NAME}.gguf")
    library = Library(settings)
    paths = {m.id: m.files[0] for m in library.list()}
    runtime = Runtime(settings, resolver=lambda ref: paths[ref])  # the path the name had: the race's window
    thread = ServerThread(create_app(runtime, settings, library), "127.0.0.1", 0)
    thread.start()
    yield thread.url, path
    thread.stop()
    runtime.close()


def test_ollama_show_of_a_model_removed_by_hand_while_remembered_is_404(gone):
    url, path = gone
    client = ollama.Client(host=url, timeout=30)
    assert client.show(NAME).modelfile  # the name is now remembered
    path.unlink()
    with pytest.raises(ollama.ResponseError) as err:
        client.show(NAME)
    assert err.value.status_code == 404 and NAME in err.value.error


def test_openai_model_lookup_of_a_removed_model_is_404(gone):
    url, path = gone
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=30)
    assert client.models.retrieve(NAME).id == NAME
    path.unlink()
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve(NAME)


def test_running_a_removed_model_is_404_on_every_dialect(gone):
    url, path = gone
    oai = openai.OpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0, timeout=30)
    assert client_sees(oai.models.retrieve, NAME)  # remembered
    path.unlink()
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    with pytest.raises(openai.NotFoundError):
        oai.embeddings.create(model=NAME, input="hi")
    with pytest.raises(ollama.ResponseError) as err:
        ollama.Client(host=url, timeout=30).chat(model=NAME, messages=[{"role": "user", "content": "hi"}])
    assert err.value.status_code == 404
    claude = anthropic.Anthropic(base_url=url, api_key="x", max_retries=0, timeout=30)
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.count_tokens(model=NAME, messages=[{"role": "user", "content": "hi"}])


def client_sees(lookup, name: str) -> bool:
    return lookup(name).id == name
