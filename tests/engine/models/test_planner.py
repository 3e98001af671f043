"""The fit planner against fake device sets, with model headers written by the gguf package."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fireside.engine.models.exactness import exact_replies, replies_text
from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.models.hardware import Device, Hardware
from fireside.engine.models.inspection import inspect_file
from fireside.engine.models.planner import plan_fit
from tests.helpers.gguf_builder import LLAMA_8B, LLAMA_70B, MIXTRAL_8X7B, Q, write_model

GiB = 1024**3


def machine(*gpus: tuple[float, float], ram: float = 32) -> Hardware:
    """A fake machine: GPUs as (total GiB, free GiB), plus a CPU with ``ram`` GiB free."""
    devices = [Device(i, f"GPU{i}", "fake", "gpu", "CUDA", int(t * GiB), int(f * GiB)) for i, (t, f) in enumerate(gpus)]
    devices.append(Device(len(devices), "CPU", "fake", "cpu", "CPU", int(ram * GiB), int(ram * GiB)))
    return Hardware(["CUDA", "CPU"] if gpus else ["CPU"], devices, int(ram * GiB), int(ram * GiB), 8, 16, bool(gpus))


@pytest.fixture(scope="module")
def q8b(tmp_path_factory):
    return inspect_file(write_model(tmp_path_factory.mktemp("p") / "8b.gguf", LLAMA_8B, weight=Q.Q4_K, output=Q.Q6_K))


@pytest.fixture(scope="module")
def q70b(tmp_path_factory):
    return inspect_file(write_model(tmp_path_factory.mktemp("p") / "70b.gguf", LLAMA_70B, weight=Q.Q4_K, output=Q.Q6_K))


def test_no_gpu_runs_on_the_cpu_with_everything_in_ram(q8b):
    plan = plan_fit(q8b, machine(), LoadOptions(context=8192, parallel=1))
    assert (plan.verdict, plan.n_gpu_layers, plan.gpus) == ("cpu_only", 0, [])
    assert plan.ram.weights_bytes == q8b.weights_bytes
    assert plan.kv_type == "q8_0"  # on the CPU, the cache that keeps replies exact (exactness.kv_for)
    assert plan.ram.kv_bytes == 144 * 1024 * 8192 * 17 // 32  # 0.6 GiB: 1.125 GiB were it f16
    assert plan.llama_kwargs()["n_gpu_layers"] == 0 and plan.llama_kwargs()["type_k"] == 8


def test_8b_fits_fully_on_one_8gb_gpu_at_8k(q8b):
    plan = plan_fit(q8b, machine((8, 7.6)), LoadOptions(context=8192, parallel=1))
    assert plan.verdict == "full_gpu"
    assert plan.n_gpu_layers == 37  # 36 layers plus the output layer
    gpu = plan.gpus[0]
    assert gpu.total_bytes <= gpu.available_bytes
    assert gpu.kv_bytes == 144 * 1024 * 8192
    assert plan.ram.weights_bytes < 0.1 * q8b.weights_bytes  # only the token embedding stays behind
    assert plan.max_context >= 8192


def test_8b_at_32k_on_8gb_is_a_partial_offload_that_uses_the_gpu_fully(q8b):
    hw = machine((8, 7.6))
    plan = plan_fit(q8b, hw, LoadOptions(context=32768))
    assert plan.verdict == "partial"
    assert 20 < plan.n_gpu_layers < 36
    assert plan.gpus[0].total_bytes <= plan.gpus[0].available_bytes
    one_more = plan_fit(q8b, hw, LoadOptions(context=32768, n_gpu_layers=plan.n_gpu_layers + 1))
    assert one_more.verdict == "will_not_fit"  # the planner offloaded as many layers as fit
    # llama.cpp counts the output layer first: n_gpu_layers - 1 repeating layers go beside it
    assert plan.ram.layers == 36 - (plan.n_gpu_layers - 1) and plan.gpus[0].layers == plan.n_gpu_layers - 1
    assert plan.ram.weights_bytes < q8b.weights_bytes - q8b.other_bytes["output"]  # the output is on the GPU


def test_70b_across_24_and_12_gb_gpus_splits_by_free_memory(q70b):
    plan = plan_fit(q70b, machine((24, 23), (12, 11.5), ram=64), LoadOptions(context=8192))
    assert plan.verdict == "partial"
    big, small = plan.gpus
    assert big.layers > 0 and small.layers > 0
    assert big.layers + small.layers == plan.n_gpu_layers - 1  # and the output layer, on the last GPU
    assert 1.6 < big.layers / small.layers < 2.4  # about 2:1, like their free memory
    split = plan.tensor_split[0] / sum(plan.tensor_split)  # llama.cpp splits the output's place too
    assert big.layers == math.ceil(split * plan.n_gpu_layers)  # places p with p / n_gpu_layers < split
    assert all(g.total_bytes <= g.available_bytes for g in plan.gpus)
    assert plan.ram.layers == 80 - (plan.n_gpu_layers - 1)


def test_model_larger_than_everything_will_not_fit_and_says_by_how_much(q70b):
    plan = plan_fit(q70b, machine((8, 7.6), ram=16), LoadOptions(context=8192))
    assert plan.verdict == "will_not_fit"
    needed = plan.ram.total_bytes + plan.gpus[0].total_bytes
    assert plan.shortfall_bytes >= needed - (16 + 7.6) * GiB
    assert plan.shortfall_bytes > 10 * GiB


def test_user_overrides_win(q8b):
    opts = LoadOptions(n_gpu_layers=10, tensor_split=(1, 1), main_gpu=1, context=4096, kv_type="q8_0",
                       flash_attn=False, threads=3, use_mmap=False, use_mlock=True)
    plan = plan_fit(q8b, machine((24, 23), (24, 23)), opts)
    assert plan.n_gpu_layers == 10
    assert [g.layers for g in plan.gpus] == [5, 4]  # llama.cpp's split of 10 places, the last the output's
    kw = plan.llama_kwargs()
    assert kw["n_gpu_layers"] == 10 and kw["tensor_split"] == [1, 1] and kw["main_gpu"] == 1
    assert kw["n_ctx"] == 4096 and kw["flash_attn"] is False and kw["n_threads"] == 3
    assert kw["use_mmap"] is False and kw["use_mlock"] is True
    assert kw["type_k"] == kw["type_v"] == 8  # GGML_TYPE_Q8_0
    f16 = plan_fit(q8b, machine((24, 23), (24, 23)), LoadOptions(n_gpu_layers=10, context=4096))
    assert sum(g.kv_bytes for g in plan.gpus) < sum(g.kv_bytes for g in f16.gpus)


def test_each_slot_has_its_own_kv_cache_and_the_automatic_count_keeps_the_verdict(q8b):
    roomy = plan_fit(q8b, machine(), LoadOptions(context=8192))
    assert roomy.parallel == 4 and roomy.ram.kv_bytes == 4 * 144 * 1024 * 8192 * 17 // 32
    assert roomy.llama_kwargs()["n_seq_max"] == 4 and roomy.llama_kwargs()["n_ctx"] == 8192  # per slot
    tight = plan_fit(q8b, machine((8, 7.6)), LoadOptions(context=8192))
    assert tight.verdict == "full_gpu" and tight.parallel == 2  # four 8k caches would push layers off the GPU
    assert "2 parallel slots" in " ".join(tight.notes)
    forced = plan_fit(q8b, machine((8, 7.6)), LoadOptions(context=8192, parallel=4))
    assert forced.verdict == "partial"  # the user's choice wins, and the plan says what it costs


def test_largest_context_keeps_the_verdict(q8b):
    hw = machine((8, 7.6))
    plan = plan_fit(q8b, hw, LoadOptions(context=8192))
    assert plan_fit(q8b, hw, LoadOptions(context=plan.max_context)).verdict == "full_gpu"
    assert plan_fit(q8b, hw, LoadOptions(context=plan.max_context + 64)).verdict != "full_gpu"


def test_flash_attention_shrinks_the_compute_buffer(q8b):
    hw = machine((24, 23))
    on = plan_fit(q8b, hw, LoadOptions(context=32768, flash_attn=True))
    off = plan_fit(q8b, hw, LoadOptions(context=32768, flash_attn=False))
    assert on.gpus[0].compute_bytes < off.gpus[0].compute_bytes / 4


def test_plan_compares_with_what_llama_cpp_reports(q8b):
    plan = plan_fit(q8b, machine(), LoadOptions(context=8192))
    report = plan.compare({"weights": plan.ram.weights_bytes, "kv": plan.ram.kv_bytes * 2})
    assert report["weights"]["ratio"] == pytest.approx(1.0)
    assert report["kv"]["ratio"] == pytest.approx(0.5)


def test_a_vision_projector_counts_on_the_device_that_runs_it(q8b, tmp_path):
    from fireside.engine.models.planner import with_projector
    from fireside.engine.models.projector import read_projector
    from tests.helpers.vision_model import write_projector

    projector = read_projector(write_projector(tmp_path / "mmproj-f16.gguf", n_embd_text=64))
    assert projector is not None and projector.compute_bytes > 16 * 2**20
    on_cpu = plan_fit(q8b, machine(ram=32), LoadOptions(context=8192))
    with_it = with_projector(on_cpu, projector.size, projector.compute_bytes)
    assert with_it.ram.total_bytes == on_cpu.ram.total_bytes + projector.size + projector.compute_bytes
    assert on_cpu.ram.total_bytes == plan_fit(q8b, machine(ram=32), LoadOptions(context=8192)).ram.total_bytes  # a copy
    on_gpu = plan_fit(q8b, machine((8, 8)), LoadOptions(context=8192))
    assert on_gpu.verdict == "full_gpu"
    moved = with_projector(on_gpu, projector.size, projector.compute_bytes)
    assert moved.gpus[0].total_bytes == on_gpu.gpus[0].total_bytes + projector.size + projector.compute_bytes
    # a projector that does not fit beside the model: the plan says so, before a runner tries
    huge = with_projector(on_gpu, 8 * GiB, projector.compute_bytes)
    assert huge.verdict == "will_not_fit" and huge.shortfall_bytes > 0 and not huge.fits


def test_auto_kv_is_exact_on_the_cpu_and_f16_on_a_gpu_or_by_choice(q8b):
    cpu = plan_fit(q8b, machine(), LoadOptions(context=4096, parallel=1))
    gpu = plan_fit(q8b, machine((8, 7.6)), LoadOptions(context=4096, parallel=1))
    chosen = plan_fit(q8b, machine(), LoadOptions(context=4096, parallel=1, kv_type="f16"))
    no_flash = plan_fit(q8b, machine(), LoadOptions(context=4096, parallel=1, flash_attn=False))
    assert (cpu.kv_type, gpu.kv_type, chosen.kv_type, no_flash.kv_type) == ("q8_0", "f16", "f16", "f16")
    assert [exact_replies(p) for p in (cpu, gpu, chosen, no_flash)] == [True, False, False, False]
    assert replies_text(cpu).startswith("yes") and "GPU" in replies_text(gpu)
    assert "f16 KV cache" in replies_text(chosen) and "flash attention is off" in replies_text(no_flash)
    assert not no_flash.refusal and all("row by row" in n for n in cpu.notes)  # auto chose it: nothing refused


def test_an_exact_plan_multiplies_k_quant_weights_row_by_row_and_says_so(q8b, tmp_path):
    """Q4_K and Q6_K weights in a batch took kernels that round otherwise than one row's (the repacked gemm, an
    extra buffer type, and ggml's tiled kernel), so a prediction or another stream moved an exact reply."""
    cpu = plan_fit(q8b, machine(), LoadOptions(context=4096, parallel=1))
    assert cpu.row_kernels and cpu.notes == ["Q4_K, Q6_K weights are multiplied row by row, as one token is, so "
                                             "replies stay exact (prompts evaluate slower; an f16 KV cache lifts both)"]
    assert (cpu.llama_kwargs()["use_extra_bufts"], cpu.llama_kwargs()["tiled_mm"]) == (False, False)
    fast = [plan_fit(q8b, machine(), LoadOptions(context=4096, parallel=1, kv_type="f16")),
            plan_fit(q8b, machine((8, 7.6)), LoadOptions(context=4096, parallel=1))]
    q4_0 = inspect_file(write_model(tmp_path / "q4_0.gguf", LLAMA_8B, weight=Q.Q4_0, output=Q.Q8_0))
    fast.append(plan_fit(q4_0, machine(), LoadOptions(context=4096, parallel=1)))  # rounds alike in any batch
    assert exact_replies(fast[2]) and not any(p.row_kernels or "tiled_mm" in p.llama_kwargs() for p in fast)


def test_iq4_nl_weights_make_replies_not_guaranteed_and_say_why(q8b):
    """IQ4_NL weights in a batch of two rows or more take llamafile's sgemm, which llama.cpp builds in with
    no switch at run time (bench/batch_invariance.py: DIFFERENT with both other switches off), so an exact
    plan cannot be promised; row kernels would cost speed and buy nothing."""
    mixed = replace(q8b, quant_mix={"IQ4_NL": 4 << 30, **q8b.quant_mix})
    plan = plan_fit(mixed, machine(), LoadOptions(context=4096, parallel=1))
    assert not exact_replies(plan) and not plan.row_kernels and plan.kv_type == "q8_0"
    assert replies_text(plan).startswith("not guaranteed (IQ4_NL weights are multiplied in batches")


def _with_llvmpipe(hw: Hardware, total_gib: float = 32) -> Hardware:
    """``hw`` with Mesa's software Vulkan device, as ``GGML_VK_VISIBLE_DEVICES=0`` shows it to llama.cpp."""
    soft = Device(len(hw.devices), "Vulkan0", "llvmpipe (LLVM 15.0.6, 256 bits)", "software", "Vulkan",
                  int(total_gib * GiB), int(total_gib * GiB))
    return Hardware([*hw.backends, "Vulkan"], [*hw.devices, soft], hw.ram_total_bytes, hw.ram_available_bytes,
                    hw.cpu_cores, hw.cpu_threads, True)


def test_a_software_device_is_never_chosen_on_its_own_and_llama_cpp_is_told_so(q8b):
    hw = _with_llvmpipe(machine())
    plan = plan_fit(q8b, hw, LoadOptions(context=4096, parallel=1))
    assert (plan.verdict, plan.n_gpu_layers) == ("cpu_only", 0)
    assert plan.llama_kwargs()["devices"] == []  # else llama.cpp would offload to llvmpipe by itself


def test_a_named_software_device_takes_the_layers(q8b):
    hw = _with_llvmpipe(machine((8, 7.6)))
    for name in ("llvmpipe", "Vulkan0"):
        plan = plan_fit(q8b, hw, LoadOptions(context=4096, parallel=1, device=name))
        assert plan.verdict == "full_gpu" and [g.name for g in plan.gpus] == ["Vulkan0"]
        assert plan.llama_kwargs()["devices"] == ["Vulkan0"]
    auto = plan_fit(q8b, hw, LoadOptions(context=4096, parallel=1))
    assert [g.name for g in auto.gpus] == ["GPU0"] and auto.llama_kwargs()["devices"] == ["GPU0"]


def test_a_device_that_is_not_there_is_refused_with_the_devices_that_are(q8b):
    plan = plan_fit(q8b, _with_llvmpipe(machine()), LoadOptions(context=4096, parallel=1, device="CUDA3"))
    assert not plan.fits and "'CUDA3'" in plan.refusal and "llvmpipe" in plan.refusal
    assert "devices" not in plan_fit(q8b, machine((8, 7.6)), LoadOptions(parallel=1)).llama_kwargs()


def test_the_gpu_budget_caps_what_the_planner_puts_on_the_device(q8b):
    hw = _with_llvmpipe(machine(), total_gib=64)  # llvmpipe reports host memory as its own
    free = plan_fit(q8b, hw, LoadOptions(context=4096, parallel=1, device="llvmpipe"))
    capped = plan_fit(q8b, hw, LoadOptions(context=4096, parallel=1, device="llvmpipe", gpu_budget_gib=2))
    assert free.verdict == "full_gpu" and capped.verdict == "partial"
    assert 0 < capped.n_gpu_layers < free.n_gpu_layers
    assert capped.gpus[0].total_bytes <= 2 * GiB == capped.gpus[0].available_bytes
    assert any("2 GiB" in n for n in capped.notes)


def test_planned_device_and_host_bytes_are_set_beside_llama_cpps_buffers(q8b):
    plan = plan_fit(q8b, _with_llvmpipe(machine()), LoadOptions(context=4096, parallel=1, device="llvmpipe",
                                                                n_gpu_layers=18))
    buffers = {"Vulkan0 model": 2000.0, "Vulkan0 KV": 288.0, "Vulkan0 compute": 300.0,
               "CPU_Mapped model": 2400.0, "CPU KV": 288.0, "Vulkan_Host compute": 20.0}
    cmp = plan.compare_devices(buffers)
    assert cmp["device"]["reported"] == int(2588 * 2**20) and cmp["host"]["reported"] == int(2708 * 2**20)
    g = plan.gpus[0]
    assert cmp["device"]["planned"] == g.weights_bytes + g.kv_bytes + g.compute_bytes  # the reserve is not allocated
    assert 0 < cmp["device"]["planned"] < plan.gpu_bytes


@pytest.fixture(scope="module")
def mixtral(tmp_path_factory):
    return inspect_file(write_model(tmp_path_factory.mktemp("p") / "8x7b.gguf", MIXTRAL_8X7B, weight=Q.Q4_K,
                                    output=Q.Q6_K))


def test_a_moe_models_experts_stay_in_ram_when_that_puts_every_layer_on_the_gpu(mixtral):
    """Mixtral 8x7B (25 GB of Q4_K) on a 12 GB card: whole layers, about a third fit; with the experts
    (96% of a layer's bytes) kept in host memory, the attention of all 32 layers and the output do, and the
    runner is told to keep them there (llama-server's --cpu-moe)."""
    hw = machine((12, 11.5), ram=64)
    whole = plan_fit(mixtral, hw, LoadOptions(context=8192, parallel=1, experts_on_cpu=False))
    plan = plan_fit(mixtral, hw, LoadOptions(context=8192, parallel=1))
    assert whole.verdict == "partial" and 5 < whole.n_gpu_layers < 16 and not whole.experts_on_cpu
    assert plan.experts_on_cpu and plan.n_gpu_layers == 33 and plan.verdict == "partial"  # split by tensor
    experts = sum(mixtral.expert_bytes)
    assert experts > 0.9 * sum(mixtral.layer_bytes)
    assert plan.gpus[0].weights_bytes < 2 * 2**30 and plan.gpus[0].fits  # attention, routers, output
    assert plan.ram.weights_bytes >= experts
    assert any("experts" in n and "32 of 32 layers" in n and f"instead of {whole.n_gpu_layers - 1}" in n
               for n in plan.notes)
    assert plan.llama_kwargs()["host_tensors"] == [r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"]
    assert "host_tensors" not in whole.llama_kwargs()


def test_experts_stay_where_they_are_when_nothing_is_gained_or_the_user_chose(mixtral, q8b):
    big = plan_fit(mixtral, machine((80, 79), ram=64), LoadOptions(context=8192, parallel=1))
    assert big.verdict == "full_gpu" and not big.experts_on_cpu  # the whole model fits: no reason to split
    cpu = plan_fit(mixtral, machine(ram=64), LoadOptions(context=8192, parallel=1))
    assert cpu.verdict == "cpu_only" and not cpu.experts_on_cpu and "host_tensors" not in cpu.llama_kwargs()
    mine = plan_fit(mixtral, machine((12, 11.5), ram=64), LoadOptions(context=8192, parallel=1, n_gpu_layers=8))
    assert mine.n_gpu_layers == 8 and not mine.experts_on_cpu  # a user's layer count is kept as asked
    dense = plan_fit(q8b, machine((4, 3.5)), LoadOptions(context=8192, parallel=1))
    assert dense.verdict == "partial" and not dense.experts_on_cpu and q8b.expert_bytes == []


def test_when_even_the_attention_does_not_fit_the_experts_move_anyway_and_more_layers_go(mixtral):
    plan = plan_fit(mixtral, machine((2, 1.2), ram=64), LoadOptions(context=8192, parallel=1))
    whole = plan_fit(mixtral, machine((2, 1.2), ram=64), LoadOptions(context=8192, parallel=1, experts_on_cpu=False))
    assert plan.experts_on_cpu and plan.verdict == "partial" and plan.n_gpu_layers > whole.n_gpu_layers
    assert plan.gpus[0].fits


def test_a_measured_f16_attention_is_taken_only_where_its_larger_cache_fits(q8b):
    from fireside.engine.models.planner import with_attention

    roomy = plan_fit(q8b, machine(), LoadOptions(context=32768, parallel=1))
    f16 = with_attention(roomy, q8b, "f16", False)
    assert (f16.kv_type, f16.flash_attn) == ("f16", False)
    assert f16.ram.kv_bytes == 144 * 1024 * 32768 and roomy.ram.kv_bytes == 144 * 1024 * 32768 * 17 // 32
    assert f16.llama_kwargs()["flash_attn"] is False and "type_k" not in f16.llama_kwargs()
    # Q4_K weights: the exact q8_0 plan multiplies them row by row; plain f16 attention is not exact, so it
    # takes the fast kernels back and stops saying otherwise
    assert roomy.row_kernels and not f16.row_kernels and "use_extra_bufts" not in f16.llama_kwargs()
    assert not any("row by row" in n for n in f16.notes) and any("row by row" in n for n in roomy.notes)
    # the same load where free memory holds the q8_0 cache (2.3 GiB) but not the f16 one (4.5 GiB)
    tight = plan_fit(q8b, machine(ram=roomy.ram.total_bytes / GiB + 1), LoadOptions(context=32768, parallel=1))
    assert tight.fits and tight.kv_type == "q8_0"
    assert with_attention(tight, q8b, "f16", False) is None
    same = with_attention(tight, q8b, "q8_0", True)
    assert (same.ram.kv_bytes, same.row_kernels, same.notes) == (tight.ram.kv_bytes, True, tight.notes)


def _lent(hw: Hardware, *lenders: tuple[str, float]) -> Hardware:
    """``hw`` with paired devices lending (name, GiB), as ``rpc.Lenders.offer`` adds them to a load's hardware."""
    lent = [Device(1000 + i, f"rpc:{n}", f"{n}: lent", "remote", "RPC", int(g * GiB), int(g * GiB))
            for i, (n, g) in enumerate(lenders)]
    return replace(hw, devices=[*hw.devices, *lent])


def test_lent_memory_takes_only_the_layers_this_machine_cannot_hold(q70b):
    opts = LoadOptions(context=4096, parallel=1, with_devices=("desk", "attic"))
    alone = plan_fit(q70b, machine(ram=24), LoadOptions(context=4096, parallel=1))
    assert alone.verdict == "will_not_fit"
    plan = plan_fit(q70b, _lent(machine(ram=24), ("desk", 16), ("attic", 16)), opts)
    assert plan.fits and plan.devices == ["rpc:desk", "rpc:attic"] and plan.ram.fits
    assert 0 < plan.n_gpu_layers < q70b.block_count  # most layers stay here: each lent one costs a round trip
    fewer = plan_fit(q70b, _lent(machine(ram=24), ("desk", 16), ("attic", 16)),
                     replace(opts, n_gpu_layers=plan.n_gpu_layers - 1))
    assert not fewer.ram.fits  # one layer fewer on the lenders and this machine is short
    assert sum(u.layers for u in plan.gpus) == plan.n_gpu_layers - 1  # the rest; the output layer counts one


def test_lent_memory_that_cannot_hold_the_rest_refuses_with_the_numbers(q70b):
    plan = plan_fit(q70b, _lent(machine(ram=16), ("desk", 4)),
                    LoadOptions(context=4096, parallel=1, with_devices=("desk",)))
    assert plan.verdict == "will_not_fit" and plan.shortfall_bytes > 10 * GiB
    missing = plan_fit(q70b, machine(ram=16), LoadOptions(context=4096, parallel=1, with_devices=("desk",)))
    assert "no memory lent by desk" in missing.refusal


def test_a_lending_device_is_never_chosen_unless_a_load_names_it(q8b):
    hw = _lent(machine(ram=4), ("desk", 64))
    plan = plan_fit(q8b, hw, LoadOptions(context=8192, parallel=1))
    assert plan.n_gpu_layers == 0 and plan.gpus == [] and hw.named("desk") is None


def test_a_cpu_only_load_reads_its_weights_into_huge_pages_only_where_that_is_safe(q8b):
    """Weights read into huge pages (not mapped from the file) on a CPU-only machine whose kernel has transparent
    huge pages, with the load in half the free memory; anywhere else, or asked not to, the file is mapped."""
    def plan(hw, **options):
        return plan_fit(q8b, hw, LoadOptions(context=8192, parallel=1, **options))

    thp = replace(machine(), huge_pages="madvise")
    chosen = plan(thp)
    assert (chosen.huge_pages, chosen.use_mmap, chosen.llama_kwargs()["use_mmap"]) == (True, False, False)
    assert any("huge pages" in n for n in chosen.notes)
    assert plan(replace(thp, huge_pages="always")).huge_pages
    mapped = [plan(machine()),  # no transparent huge pages (or not Linux with glibc)
              plan(replace(thp, huge_pages="never")),
              plan(thp, huge_pages=False),  # --no-huge-pages
              plan(replace(machine((8, 7.6)), huge_pages="madvise")),  # a GPU machine: its own host buffers
              plan(replace(machine(ram=10), huge_pages="madvise"))]  # a 5.6 GiB load in 10 GiB free: over half
    assert [(p.huge_pages, p.use_mmap) for p in mapped] == [(False, True)] * len(mapped)
    assert mapped[-1].fits  # it fits mapped, as before
    assert plan(replace(machine(ram=10), huge_pages="madvise"), huge_pages=True).huge_pages  # asked for: fitting will do
