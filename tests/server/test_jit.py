"""Just-in-time loading off: the server answers only for models the user loaded, and says why."""

from __future__ import annotations

import openai
import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.server import ServerThread, create_app

pytestmark = pytest.mark.model
HI = [{"role": "user", "content": "Hi"}]


def test_without_jit_an_unloaded_model_is_refused_until_the_user_loads_it(server_settings, library):
    runtime = Runtime(server_settings, resolver=lambda ref: library.get(ref).path, idle_ttl_s=0)
    server = ServerThread(create_app(runtime, server_settings, library, jit=False), "127.0.0.1", 0)
    server.start()
    try:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0)
        with pytest.raises(openai.NotFoundError) as refused:
            client.chat.completions.create(model="starter", messages=HI, max_tokens=2)
        assert refused.value.body["code"] == "model_not_found"
        assert "just-in-time loading is off" in refused.value.body["message"]
        assert runtime.loaded() == []  # refusing loaded nothing
        assert [m.id for m in client.models.list()] == [m.id for m in library.list()]  # still listed
        runtime.load("starter", LoadOptions(context=1024))
        reply = client.chat.completions.create(model="starter", messages=HI, max_tokens=2, temperature=0)
        assert reply.usage.completion_tokens == 2
    finally:
        server.stop()
        runtime.close()
