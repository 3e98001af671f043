"""A reply that echoes the template's own markup has it removed (issue 27).

After a tool result with ``tool_choice: "auto"``, the starter model's Responses reply began with the
``<tool_response>`` wrapper the prompt put around that result. Through the official ``openai`` client,
streamed and not, the reply the client reads holds no template markup, and the stream's deltas add up
to the same text (so no marker leaked in a piece split across deltas).
"""

from __future__ import annotations

import openai
import pytest

pytestmark = pytest.mark.model

TOOL = {"type": "function", "name": "get_weather", "description": "Get the weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {
            "type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}}
# greedy, the starter answers this chain with "<tool_response>\nSunny, 21 C" on the old parser
CHAIN = [{"role": "user", "content": "What is the weather in Paris, in celsius?"},
         {"type": "function_call", "call_id": "call_1", "name": "get_weather",
          "arguments": '{"city": "Paris", "unit": "celsius"}'},
         {"type": "function_call_output", "call_id": "call_1", "output": "Sunny, 21 C"}]


@pytest.fixture(scope="module")
def oai(base_url):
    return openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


MARKUP = ["tool_response>", "<tool_response", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<start_of_turn>"]


def _markup(text: str) -> list[str]:
    return [m for m in MARKUP if m in text]


def test_a_reply_after_a_tool_result_holds_no_template_markup(oai):
    reply = oai.responses.create(model="starter", input=CHAIN, tools=[TOOL], tool_choice="auto",
                                 temperature=0, max_output_tokens=40)
    assert reply.output_text.strip() and not _markup(reply.output_text), reply.output_text


def test_the_streamed_reply_holds_no_template_markup_in_any_delta(oai):
    events = list(oai.responses.create(model="starter", input=CHAIN, tools=[TOOL], tool_choice="auto",
                                       temperature=0, max_output_tokens=40, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response.output_text
    assert "".join(deltas) == final and final.strip()
    assert not _markup(final) and not any(_markup(d) for d in deltas), deltas
