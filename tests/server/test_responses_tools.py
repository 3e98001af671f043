"""The Responses API's tools as Codex sends them, through the official ``openai`` package against the
real server and SmolLM2: ``namespace`` tools become the functions they group (and a call comes back
with its namespace), hosted tools the server cannot run are left out unless forced, and
``max_output_tokens`` is echoed."""

from __future__ import annotations

import json

import openai
import pytest

pytestmark = pytest.mark.model
SPAWN = {"type": "function", "name": "spawn_agent", "description": "Start a helper agent on a task",
         "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}}
AGENTS = {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents", "tools": [SPAWN]}


@pytest.fixture(scope="module")
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


def test_a_namespace_function_is_called_and_comes_back_in_its_namespace(oai):
    events = list(oai.responses.create(model="starter", input="Start a helper to write tests.", max_output_tokens=40,
                                       tools=[AGENTS, {"type": "web_search", "external_web_access": False}],
                                       tool_choice="required", temperature=0, stream=True))
    added = next(e.item for e in events if e.type == "response.output_item.added")
    call = events[-1].response.output[-1]
    assert added.type == call.type == "function_call"
    assert (added.name, added.namespace) == (call.name, call.namespace) == ("spawn_agent", "multi_agent_v1")
    assert "task" in json.loads(call.arguments)
    follow = oai.responses.create(model="starter", max_output_tokens=8, tools=[AGENTS], input=[
        {"role": "user", "content": "Start a helper to write tests."},
        {"type": "function_call", "call_id": call.call_id, "name": "spawn_agent", "namespace": "multi_agent_v1",
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "Helper started."}])
    assert follow.status in ("completed", "incomplete") and follow.output_text


def test_hosted_tools_are_left_out_unless_forced(oai):
    hosted = [{"type": "web_search", "external_web_access": False}, {"type": "code_interpreter", "container": "auto"}]
    reply = oai.responses.create(model="starter", input="Say hi.", max_output_tokens=5, tools=hosted)
    assert reply.output_text and reply.max_output_tokens == 5
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="starter", input="Search the web.", max_output_tokens=5, tools=hosted,
                             tool_choice={"type": "web_search"})
    assert "web_search" in refused.value.message and refused.value.param == "tool_choice"
