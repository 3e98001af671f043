"""What rendering a normal chat costs through ``ChatTemplate``, for comparing two versions of the code.

    python bench/templates.py [--rounds 300]

Renders a few everyday conversations (SmolLM2's own template; a Qwen2.5-style template with tools)
``--rounds`` times each, one after another, and prints the median and 90th-percentile time per render
(``render_segments``, what a chat request calls), and what constructing a ``ChatTemplate`` costs. Run it
once on this checkout (``PYTHONPATH=.pyroot`` in a helper worktree) and once on another (main) for a
before and after; the figures in docs/security.md came from that.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests package, from the repo root

from fireside.engine.models.inspection import inspect_file  # noqa: E402
from fireside.engine.prompts import templates  # noqa: E402
from tests.helpers.models import smollm2_file  # noqa: E402

QWEN_STYLE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}"
    "{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\n<tools>' }}{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools><|im_end|>\\n' }}{%- elif messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}{%- if message.content %}"
    "{{- '\\n' + message.content }}{%- endif %}{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{{- tool_call.arguments | tojson }}{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}"
    "{{- '<|im_start|>user' }}{%- endif %}{{- '\\n<tool_response>\\n' }}{{- message.content }}"
    "{{- '\\n</tool_response>' }}{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}"
    "{{- '<|im_end|>\\n' }}{%- endif %}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                            "parameters": {"type": "object",
                                                           "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}
ONE = [{"role": "user", "content": "Hello! How are you today?"}]
TURNS = [{"role": "system", "content": "You are a helpful assistant."}] + [
    {"role": "user" if i % 2 == 0 else "assistant", "content": f"Message number {i}, " + "some words " * 30}
    for i in range(20)]
TOOLS = [{"role": "user", "content": "Weather in Paris?"},
         {"role": "assistant", "content": "", "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
         {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C"},
         {"role": "user", "content": "Thanks. And Rome?"}]


def _time(fn, rounds: int) -> dict:
    fn()  # the first call may start a worker and compile: measured apart, below
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    times.sort()
    return {"median_ms": round(statistics.median(times) * 1000, 3),
            "p90_ms": round(times[int(len(times) * 0.9)] * 1000, 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    info = inspect_file(smollm2_file())
    started = time.perf_counter()
    smol = templates.ChatTemplate(info.chat_template, info.bos_token, info.eos_token)
    first = time.perf_counter() - started
    qwen = templates.ChatTemplate(QWEN_STYLE)
    figures = {"code": str(Path(templates.__file__).resolve().parents[2]), "first_construct_ms": round(first * 1000, 1),
               "construct": _time(lambda: templates.ChatTemplate(QWEN_STYLE), args.rounds // 3)}
    cases = {"smollm2, 1 message": (smol, ONE, None), "smollm2, 21 messages": (smol, TURNS, None),
             "qwen-style, 21 messages": (qwen, TURNS, None), "qwen-style, tools": (qwen, TOOLS, [WEATHER])}
    for name, (template, messages, tools) in cases.items():
        figures[name] = _time(lambda t=template, m=messages, x=tools: t.render_segments(m, tools=x), args.rounds)
    print(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
