"""Planned against allocated bytes, on a device and in host memory, at three splits of each of three models.

Needs the Vulkan build (``scripts/build-vulkan.sh``) and ``GGML_VK_VISIBLE_DEVICES=0``: loads the starter
model (SmolLM2-135M) on Mesa's software device (llvmpipe) with 0, half and all of its layers offloaded,
then the tiny vision pair's text half (2 layers) and the tiny MoE model (4 layers of 4 experts, also with
its experts kept in host memory), both the tests' (``tests/helpers``, written into a temporary folder),
through the runtime and its runner processes as the app does. For each load it prints the planner's
device and host bytes (weights, KV, compute) beside the buffers llama.cpp logged, and whether a greedy
reply equals the CPU's. Goal: every planned figure within 10% (or 16 MiB, whichever is larger) of what
llama.cpp allocated.

    GGML_VK_VISIBLE_DEVICES=0 .venv/bin/python bench/offload.py [--tokens 64] [--ctx 512]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from fireside.engine.library.starter import starter_path
from fireside.engine.models import hardware
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings
from fireside.engine.types import ChatRequest, Sampling

MiB = 2**20
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests package: the two tiny models
PROMPT = [{"role": "user", "content": "Write a short story about a lighthouse keeper and a storm."}]


def _reply(rt: Runtime, tokens: int) -> str:
    request = ChatRequest(PROMPT, Sampling(temperature=0, max_tokens=tokens))
    return "".join(c.text for c in rt.chat("model", request) if c.kind == "text")


def _error(planned: int, reported: int) -> float:
    """The planned figure's error in %, 0 when within the goal's 16 MiB floor."""
    if abs(planned - reported) <= 16 * MiB:
        return 0.0
    return 100.0 * abs(planned - reported) / max(reported, 1)


def _models(folder: Path) -> list[tuple[str, Path, list[dict]]]:
    """(name, file, the loads to measure) for the starter, the vision pair's text half and the tiny MoE model."""
    from tests.helpers.moe_model import write_moe_model
    from tests.helpers.vision_model import build_vision_pair

    starter = starter_path()
    text, _ = build_vision_pair(folder, starter)
    moe = write_moe_model(folder / "tiny-moe.F16.gguf", starter)
    return [
        ("starter", starter, [{"n_gpu_layers": n} for n in (0, 15, 31)]),
        ("vision text", text, [{"n_gpu_layers": n} for n in (0, 1, 3)]),
        ("moe", moe, [{"n_gpu_layers": 0}, {"n_gpu_layers": 2}, {"n_gpu_layers": 5},
                      {"n_gpu_layers": 5, "experts_on_cpu": True}]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--ctx", type=int, default=512)
    args = ap.parse_args()
    if not hardware.detect().software:
        raise SystemExit("no software Vulkan device: build with scripts/build-vulkan.sh, set GGML_VK_VISIBLE_DEVICES=0")
    worst_dev = worst_host = 0.0
    same = n = 0
    with tempfile.TemporaryDirectory() as home:
        for name, path, loads in _models(Path(home)):
            rt = Runtime(Settings.from_env({"FIRESIDE_HOME": home}), resolver=lambda _, p=path: p)
            try:
                base = LoadOptions(context=args.ctx, parallel=1, kv_type="f16")
                rt.load("model", base)
                cpu = _reply(rt, args.tokens)
                for load in loads:
                    rt.load("model", replace(base, device="llvmpipe", **load))
                    slot = rt._slots[next(iter(rt._slots))]  # the plan the runtime loaded with (healing applied)
                    cmp = slot.plan.compare_devices(slot.loaded.reported_buffers)
                    text = _reply(rt, args.tokens)
                    n, same = n + 1, same + (text == cpu)
                    dev, host = cmp["device"], cmp["host"]
                    worst_dev = max(worst_dev, _error(dev["planned"], dev["reported"]))
                    worst_host = max(worst_host, _error(host["planned"], host["reported"]))
                    how = f"{load['n_gpu_layers']:>2} layers" + (", experts on the CPU" if load.get("experts_on_cpu") else "")
                    print(f"{name} {how} on llvmpipe: device planned {dev['planned'] / MiB:7.1f} MiB, "
                          f"allocated {dev['reported'] / MiB:7.1f}; host planned {host['planned'] / MiB:7.1f} MiB, "
                          f"allocated {host['reported'] / MiB:7.1f}; reply {'same as' if text == cpu else 'differs from'} "
                          f"the CPU's   buffers {slot.loaded.reported_buffers}", flush=True)
            finally:
                rt.close()
    print(f"offload: {n} loads, worst device error {worst_dev:.0f}%, worst host error {worst_host:.0f}%, "
          f"identical replies {same}/{n}")


if __name__ == "__main__":
    main()
