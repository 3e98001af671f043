"""A MoE model's experts kept in host memory (``llama_model_params.tensor_buft_overrides``, which
llama-cpp-python leaves unbound): the runner's ``model_params`` fills it through ctypes with the CPU's buffer
type for every tensor the planner's pattern names, as llama-server's ``--cpu-moe`` does. On a build without
a GPU the experts are in host memory either way, so what shows here is that llama.cpp took the list (it logs
each tensor it placed by it) and that the reply is the one a plain load gives; the tests marked ``vulkan``
(``runtime/test_vulkan.py``) show the experts leaving the device."""

from __future__ import annotations

import ctypes
import re

import llama_cpp
import pytest
from llama_cpp._logger import llama_log_callback as default_log

from fireside.engine.models.inspection import EXPERTS_PATTERN
from fireside.engine.runner.process import model_params

pytestmark = pytest.mark.model
PROMPT = [{"role": "user", "content": "Tell me about the sea."}]


def _load(path, host_tensors):
    lines: list[str] = []

    @llama_cpp.llama_log_callback
    def on_log(level, text, user_data):
        lines.append(text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(on_log, ctypes.c_void_p(0))
    try:
        with model_params(False, None, None, host_tensors):
            llama = llama_cpp.Llama(str(path), n_ctx=256, n_threads=2, verbose=False)
    finally:
        llama_cpp.llama_log_set(default_log, ctypes.c_void_p(0))
    reply = llama.create_chat_completion(PROMPT, max_tokens=24, temperature=0)["choices"][0]["message"]["content"]
    llama.close()
    return reply, "".join(lines)


def test_the_experts_are_placed_by_the_list_and_the_reply_is_unchanged(moe_model):
    plain, plain_log = _load(moe_model, None)
    placed, log = _load(moe_model, [EXPERTS_PATTERN])
    overridden = re.findall(r"tensor (blk\.\d+\.ffn_\w+)\.weight .*buffer type overridden to CPU", log)
    assert sorted(overridden) == sorted(f"blk.{i}.ffn_{k}_exps" for i in range(4) for k in ("gate", "up", "down"))
    assert "overridden" not in plain_log  # the list is what placed them
    assert placed == plain and len(placed) > 20
