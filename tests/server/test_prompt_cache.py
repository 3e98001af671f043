"""The prompt cache through the API: ``fireside serve`` restarted between two turns of a conversation
answers the second from the KV state it saved on disk, and each dialect says what it did not evaluate again
with no client change (the real ``openai``, ``anthropic`` and ``ollama`` clients, one after another on the
restarted server, sharing the resumed conversation): OpenAI's ``cached_tokens``, Anthropic's
``cache_read_input_tokens`` (with ``input_tokens`` the rest) and Ollama's ``prompt_eval_count`` (only
the tokens evaluated). Then ``fireside cache ls|clear`` show and delete what was saved."""

from __future__ import annotations

import json

import anthropic
import ollama
import openai
import pytest

from tests.helpers.cli import fireside
from tests.helpers.serve import serve

pytestmark = pytest.mark.model

SYSTEM = ("You answer questions about a botanical garden with a glasshouse of tropical plants, a herb "
          "garden laid out in 1820, and a pond with water lilies that flower in July. Keep answers short. ") * 3
QUESTION = "When do the water lilies flower?"
ARGS = ("--load", "starter", "--parallel", "1")


def test_each_dialect_reports_the_turns_a_restarted_server_resumed_from_disk(tmp_path):
    home = tmp_path / "home"
    with serve(home, *ARGS) as url:
        oa = openai.OpenAI(base_url=f"{url}/v1", api_key="x")
        first = oa.chat.completions.create(model="starter", max_tokens=12, temperature=0, messages=[
            {"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}])
    reply = first.choices[0].message.content
    assert first.usage.prompt_tokens_details.cached_tokens == 0
    history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": reply}]
    n_first = first.usage.prompt_tokens

    with serve(home, *ARGS) as url:  # restarted: the first turn is on disk only
        oa = openai.OpenAI(base_url=f"{url}/v1", api_key="x")
        second = oa.chat.completions.create(model="starter", max_tokens=12, temperature=0, messages=[
            {"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": "And the herbs?"}])
        assert second.usage.prompt_tokens_details.cached_tokens >= n_first  # resumed, not re-evaluated
        # the other dialects on the same server: their own fields say what was not evaluated again
        an = anthropic.Anthropic(base_url=url, api_key="x")
        msg = an.messages.create(model="starter", max_tokens=12, system=SYSTEM,
                                 messages=[*history, {"role": "user", "content": "Is there a cafe?"}])
        assert msg.usage.cache_read_input_tokens >= n_first
        assert 0 < msg.usage.input_tokens < 40  # Anthropic's input_tokens: what was not read from the cache
        ol = ollama.Client(host=url)
        r = ol.chat(model="starter", options={"temperature": 0, "num_predict": 12}, messages=[
            {"role": "system", "content": SYSTEM}, *history, {"role": "user", "content": "Can I bring a dog?"}])
        assert 0 < r.prompt_eval_count < 40  # Ollama counts the tokens it evaluated, not the cached prefix

    listed = fireside("cache", "ls", "--json", env={**_env(home)})
    assert listed.returncode == 0, listed.stderr
    shown = json.loads(listed.stdout)
    assert shown["enabled"] and shown["entries"] and shown["size_bytes"] > 0
    assert all(e["model"].endswith(".gguf") and e["n_tokens"] > n_first for e in shown["entries"])
    cleared = fireside("cache", "clear", env=_env(home))
    assert cleared.returncode == 0 and "deleted" in cleared.stdout
    assert json.loads(fireside("cache", "ls", "--json", env=_env(home)).stdout)["entries"] == []


def test_no_prompt_cache_serves_without_saving(tmp_path):
    home = tmp_path / "home"
    for _ in range(2):
        with serve(home, *ARGS, "--no-prompt-cache") as url:
            r = openai.OpenAI(base_url=f"{url}/v1", api_key="x").chat.completions.create(
                model="starter", max_tokens=4, temperature=0, messages=[
                    {"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}])
            assert r.usage.prompt_tokens_details.cached_tokens == 0  # second start: nothing on disk to resume
    assert json.loads(fireside("cache", "ls", "--json", env=_env(home)).stdout)["entries"] == []


def _env(home):
    import os

    return {**os.environ, "FIRESIDE_HOME": str(home)}
