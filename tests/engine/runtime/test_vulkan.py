"""The GPU paths for real, on Mesa's software Vulkan device (llvmpipe): the starter model with 0, half and
all of its layers on the device, through the runtime and its runner processes, against the CPU.

Needs llama-cpp-python built with Vulkan (``scripts/build-vulkan.sh``) and ``GGML_VK_VISIBLE_DEVICES=0``
(llama.cpp hides CPU-type Vulkan devices otherwise); without them every test here skips, saying why.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.inspection import inspect_file
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.cli import fireside


def _software_device() -> str | None:
    """Why the Vulkan tests cannot run here, or None when they can."""
    try:
        hw = hardware.detect()
    except Exception as exc:  # a missing or broken build: say so, do not fail the normal suite
        return f"llama.cpp's devices could not be read: {exc}"
    if "Vulkan" not in hw.backends:
        return "this llama-cpp-python was not built with Vulkan (scripts/build-vulkan.sh)"
    if not hw.software:
        return "no software Vulkan device: install mesa-vulkan-drivers and set GGML_VK_VISIBLE_DEVICES=0"
    return None


pytestmark = [pytest.mark.vulkan, pytest.mark.model]
_why = _software_device()
if _why:
    pytestmark.append(pytest.mark.skip(reason=f"vulkan: {_why}"))

PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper and a storm."}]
LAYERS = 30  # the starter's repeating layers; 31 offloads the output layer as well


@pytest.fixture(scope="module")
def runtime(tmp_path_factory, smollm2_path):
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("vk"))}),
                 resolver=lambda _: smollm2_path)
    yield rt
    rt.close()


def _reply(rt: Runtime, options: LoadOptions) -> tuple[str, object]:
    text, loaded, _ = _tokens(rt, options)
    return text, loaded


def _tokens(rt: Runtime, options: LoadOptions) -> tuple[str, object, list]:
    """The greedy reply, the load, and each token with its two likeliest (``TokenLogprob``)."""
    loaded = rt.load("starter", options)
    chunks = [c for c in rt.chat("starter", ChatRequest(PROMPT, Sampling(temperature=0, max_tokens=64, logprobs=2)))
              if c.kind == "text"]
    return "".join(c.text for c in chunks), loaded, [t for c in chunks for t in (c.logprobs or [])]


def _margin(token) -> float:
    """How far the chosen token led the runner-up (log-probabilities differ as the logits do)."""
    return token.top[0][1] - token.top[1][1] if len(token.top) > 1 else float("inf")


@pytest.fixture(scope="module")
def cpu_reply(runtime) -> tuple[str, list]:
    text, _, tokens = _tokens(runtime, LoadOptions(context=512, parallel=1, kv_type="f16"))
    return text, tokens


def test_fireside_hw_lists_the_software_device():
    devices = json.loads(fireside("hw", "--json").stdout)["devices"]
    soft = [d for d in devices if d["kind"] == "software"]
    assert soft and "llvmpipe" in soft[0]["description"] and soft[0]["total_bytes"] > 0


def test_the_software_device_is_not_used_unless_named(runtime):
    _, loaded = _reply(runtime, LoadOptions(context=512, parallel=1))
    assert loaded.n_gpu_layers == 0 and loaded.verdict == "cpu_only"
    assert not any(name.startswith("Vulkan") for name in loaded.reported_buffers)


@pytest.mark.parametrize("layers", [0, LAYERS // 2, LAYERS + 1])
def test_layers_on_the_device_give_the_cpu_reply(runtime, cpu_reply, layers):
    """Vulkan's kernels sum in another order than the CPU's, so a greedy reply may part from the CPU's
    where two tokens were nearly tied; where it does, that place is printed with the first diverging token
    and the top-2 margin there on each side, and the replies must agree before it for a good stretch (a
    wrong offload, such as misplaced layers, garbles it at once)."""
    cpu_text, cpu_tokens = cpu_reply
    text, loaded, tokens = _tokens(runtime, LoadOptions(context=512, parallel=1, kv_type="f16", device="llvmpipe",
                                                        n_gpu_layers=layers))
    assert loaded.n_gpu_layers == layers
    on_device = sum(v for k, v in loaded.reported_buffers.items() if k == "Vulkan0 model")
    assert (on_device > 0) == (layers > 0), loaded.reported_buffers
    if text != cpu_text:
        at = next((i for i, (a, b) in enumerate(zip(text, cpu_text)) if a != b), min(len(text), len(cpu_text)))
        n = next((i for i, (a, b) in enumerate(zip(tokens, cpu_tokens)) if a.token != b.token), None)
        where = "" if n is None else (
            f"; token {n}: {tokens[n].token!r} (margin {_margin(tokens[n]):.3f}) vs the CPU's "
            f"{cpu_tokens[n].token!r} (margin {_margin(cpu_tokens[n]):.3f})")
        print(f"\n{layers} layers on llvmpipe: the reply parts from the CPU's at character {at}: "
              f"{text[at:at + 40]!r} vs {cpu_text[at:at + 40]!r}{where}")
        assert at >= 40, (text, cpu_text)


def test_a_moe_models_experts_stay_in_host_memory_while_its_layers_are_on_the_device(tmp_path, moe_model):
    """The tiny MoE model (4 experts a layer) with every layer on llvmpipe, its experts kept in host memory
    (``experts_on_cpu``, llama-server's ``--cpu-moe``): the device's model buffer is smaller by exactly the
    experts' bytes, and the reply is the one with the experts on the device and the CPU's."""
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}), resolver=lambda _: moe_model)
    try:
        base = LoadOptions(context=512, parallel=1, kv_type="f16")
        cpu, _ = _reply(rt, base)
        whole, on_device = _reply(rt, replace(base, device="llvmpipe", n_gpu_layers=-1, experts_on_cpu=False))
        split, kept = _reply(rt, replace(base, device="llvmpipe", n_gpu_layers=-1, experts_on_cpu=True))
    finally:
        rt.close()
    experts_mib = sum(inspect_file(moe_model).expert_bytes) / 2**20
    moved = on_device.reported_buffers["Vulkan0 model"] - kept.reported_buffers["Vulkan0 model"]
    assert abs(moved - experts_mib) < 0.05, (on_device.reported_buffers, kept.reported_buffers)
    assert split == whole == cpu and len(cpu) > 20


def test_a_load_the_device_refuses_heals_to_the_cpu_and_is_remembered(tmp_path, smollm2_path, monkeypatch):
    """A real device failure: ggml's Vulkan backend told its buffers may hold at most 512 KiB (as a small
    card's would be full), so the KV cache of any offloaded layer cannot be made and llama.cpp refuses the
    context. The load falls to half the layers (refused too), then to every layer on the CPU, which loads;
    it says so, and the next load of the model on this machine goes there at once, saying why."""
    monkeypatch.setenv("GGML_VK_FORCE_MAX_BUFFER_SIZE", str(512 * 1024))  # the runners inherit it
    monkeypatch.setenv("GGML_VK_FORCE_MAX_ALLOCATION_SIZE", str(512 * 1024))
    options = LoadOptions(context=2048, parallel=1, kv_type="f16", device="llvmpipe", n_gpu_layers=LAYERS + 1)
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}), resolver=lambda _: smollm2_path)
    try:
        healed = rt.load("starter", options)
        assert healed.n_gpu_layers == 0 and not any(k == "Vulkan0 KV" for k in healed.reported_buffers)
        said = " ".join(healed.warnings)
        assert "failed" in said and "every layer on the CPU instead of 31 GPU layers" in said and "remembered" in said
        assert [e["gpu_layers"] for e in rt.workarounds.entries()] == [0]
        rt.unload("starter")
        again = rt.load("starter", options)
        said = " ".join(again.warnings)
        assert again.n_gpu_layers == 0 and "failed" not in said and "the device refused more" in said
    finally:
        rt.close()


def test_the_gpu_budget_caps_what_llama_cpp_puts_on_the_device(runtime):
    """llvmpipe reports the host's memory as its own; a budget of 0.4 GiB makes the planner split the starter
    at an 8k context (its KV cache alone is 180 MiB), and what llama.cpp then allocates on the device stays
    under the budget; a larger one puts every layer there."""
    base = LoadOptions(context=8192, parallel=1, kv_type="f16", device="llvmpipe")
    _, capped = _reply(runtime, replace(base, gpu_budget_gib=0.4))
    on_device = sum(v for k, v in capped.reported_buffers.items() if k.startswith("Vulkan0")) * 2**20
    assert 1 < capped.n_gpu_layers <= LAYERS and capped.verdict == "partial", capped.reported_buffers
    assert on_device <= 0.4 * 2**30, capped.reported_buffers
    _, roomy = _reply(runtime, replace(base, gpu_budget_gib=2))
    assert roomy.n_gpu_layers == LAYERS + 1 and roomy.verdict == "full_gpu"
