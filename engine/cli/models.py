"""``fireside hw`` and ``fireside info``: what this machine has, and what a model is and how it fits."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ..fmt import human_bytes, human_count
from ..library import resolve_model
from ..models import (
    KV_TYPE_BYTES,
    FitPlan,
    LoadOptions,
    ModelInfo,
    drafting_text,
    hardware,
    inspect_file,
    plan_fit,
    replies_text,
    verdict_text,
    with_draft,
)
from ..runtime import Workarounds, attention
from ..settings import Settings
from .fmt import print_json, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("hw", help="show llama.cpp's backends, devices and this machine's memory")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    p.add_argument("--clear-workarounds", action="store_true",
                   help="forget the safer settings Fireside chose after llama.cpp crashed on this machine")
    p.set_defaults(handler=cmd_hw)

    p = sub.add_parser("info", help="inspect a model and plan how it fits on this machine")
    p.add_argument("model", help="a .gguf path, a library id, or `starter`")
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    add_load_options(p)
    p.set_defaults(handler=cmd_info)


def add_load_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("load options (default: automatic)")
    g.add_argument("--ctx", type=int, dest="context", help="context length in tokens")
    g.add_argument("--gpu-layers", type=int, dest="n_gpu_layers", help="layers to offload (-1: all)")
    g.add_argument("--tensor-split", type=lambda s: tuple(float(x) for x in s.split(",")),
                   help="ratios across GPUs, e.g. 3,1")
    g.add_argument("--main-gpu", type=int)
    g.add_argument("--device", help="offload to this device alone (a name, number or description word from "
                                    "`fireside hw`, e.g. llvmpipe); a software device is used only when named")
    g.add_argument("--gpu-budget-gib", type=float, metavar="GIB",
                   help="plan for at most this much memory on each GPU (default: FIRESIDE_GPU_BUDGET_GIB, else "
                        "all that is free)")
    g.add_argument("--with", dest="with_devices", metavar="DEVICE[,DEVICE]",
                   help="also place layers on these paired devices' lent memory (they run `fireside serve --share "
                        "--lend GIB`); layers go there only as far as this machine needs")
    g.add_argument("--ram-budget-gib", type=float, metavar="GIB",
                   help="plan for at most this much of this machine's memory (default: FIRESIDE_RAM_BUDGET_GIB, "
                        "else all that is free)")
    g.add_argument("--experts-on-cpu", action=argparse.BooleanOptionalAction, default=None,
                   help="keep a MoE model's experts in host memory and the rest of each layer on the GPU, as "
                        "llama-server's --cpu-moe (default: when that puts more layers on the GPU)")
    g.add_argument("--kv-type", choices=["auto", *sorted(KV_TYPE_BYTES)], default="auto",
                   help="the KV cache's type (auto: q8_0 on the CPU, which keeps replies exact, else f16)")
    g.add_argument("--flash-attn", action=argparse.BooleanOptionalAction, default=None)
    g.add_argument("--threads", type=int)
    g.add_argument("--parallel", type=int, help="slots: requests decoded together, each with its own "
                                                "context (default: up to 4, as many as fit)")
    g.add_argument("--no-mmap", dest="use_mmap", action="store_false", default=True)
    g.add_argument("--mlock", dest="use_mlock", action="store_true", default=False)
    g.add_argument("--huge-pages", action=argparse.BooleanOptionalAction, default=None,
                   help="read the weights into memory in huge pages instead of mapping the file: faster decoding "
                        "on the CPU (default: on Linux with transparent huge pages, for a CPU-only load within "
                        "half the free memory)")
    g.add_argument("--drafts", dest="drafts", action="store_true", default=None,
                   help="prompt-lookup drafts (speculative decoding; a request's prediction drafts either way)")
    g.add_argument("--draft", dest="draft", metavar="MODEL",
                   help="a draft model for speculative decoding: a smaller model with the same vocabulary "
                        "(a library id, a .gguf path, or `starter`)")


def load_options(args: argparse.Namespace) -> LoadOptions:
    return LoadOptions.from_dict(vars(args)).within(Settings.from_env())


def _with_lent(hw, options: LoadOptions, settings: Settings):
    """``hw`` with the memory the paired devices in ``--with`` lend now (asked of each over its TLS)."""
    if not options.with_devices:
        return hw
    from ..devices import DeviceBook
    from ..rpc import lent_now

    lent, _ = lent_now(DeviceBook(settings), options.with_devices)
    return replace(hw, devices=[*hw.devices, *lent])


def cmd_hw(args: argparse.Namespace) -> int:
    workarounds = Workarounds(Settings.from_env().data_dir / "workarounds.json")
    if args.clear_workarounds:
        n = workarounds.clear()
        print(f"forgot {n} workaround{'s' * (n != 1)}: the next load of each model tries llama.cpp's full configuration")
        return 0
    hw = hardware.detect()
    if args.json:
        print_json({**hw.to_dict(), "workarounds": workarounds.entries(),
                    "attention": attention.Choices(Settings.from_env().data_dir / "attention.json").entries()})
        return 0
    print(f"llama.cpp {hw.llama_cpp_version}   backends: {', '.join(hw.backends) or 'none'}   "
          f"GPU offload: {'yes' if hw.gpu_offload else 'no'}   engine: {hardware.engine_build(hw)}")
    print(f"CPU: {hw.cpu_cores} cores, {hw.cpu_threads} threads   RAM: "
          f"{human_bytes(hw.ram_available_bytes)} free of {human_bytes(hw.ram_total_bytes)}   huge pages: "
          f"{hw.huge_pages or 'none'}{' (CPU-only loads read their weights into them)' if hw.huge_page_weights else ''}")
    rows = [[str(d.index), d.name, d.kind, d.backend, human_bytes(d.free_bytes), human_bytes(d.total_bytes),
             d.description] for d in hw.devices]
    print(table(rows, ["#", "device", "type", "backend", "free", "total", "description"]))
    for note in hw.notes:
        print(f"note: {note}")
    for a in attention.Choices(Settings.from_env().data_dir / "attention.json").entries():
        lane = attention.lane(a.get("figures", {}), 1 << 20)  # from where, in a context long enough
        print(f"attention: {a.get('model', '?')} and its architecture load with {attention.describe(a, lane)}")
    for w in workarounds.entries():
        print(f"workaround: {w['model']} loads with {w['description']}: llama.cpp {w['reason']} in this build "
              f"(llama-cpp-python {w.get('llama_cpp') or '?'}) without it. `fireside hw --clear-workarounds` forgets it.")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    settings = Settings.from_env()
    info = inspect_file(resolve_model(args.model, settings))
    options = load_options(args)
    plan = plan_fit(info, _with_lent(hardware.detect(), options, settings), options)
    if options.draft:
        plan = with_draft(plan, inspect_file(resolve_model(options.draft, settings)))
    measured = attention.Choices(settings.data_dir / "attention.json").for_model(info, options.threads)
    auto = attention.leaves_choice(options, plan)
    plan = attention.planned(plan, info, options, measured)  # what a load takes (loading._attention)
    if args.json:
        print_json({"model": info.to_dict(), "plan": plan.to_dict()})
        return 0
    print(describe_model(info))
    print()
    print(describe_plan(plan))
    if not measured:
        print("attention: not measured on this machine yet (it is after this architecture's first load)")
    elif not auto:
        print(f"attention: as this load asks (measured on this machine: {attention.figures_text(measured)})")
    elif not any(n.startswith("attention:") for n in plan.notes):  # else the plan's notes above said it
        print(f"attention: measured on this machine: {attention.figures_text(measured)}")
    return 0


def describe_model(info: ModelInfo) -> str:
    kv = ", ".join(f"{human_bytes(info.kv_bytes_per_token(t))} ({t})" for t in KV_TYPE_BYTES)
    mix = ", ".join(f"{t} {human_bytes(b)}" for t, b in info.quant_mix.items())
    lines = [
        f"{info.name}  ({info.path})",
        f"  architecture     {info.architecture}, {human_count(info.parameter_count)} parameters",
        f"  quantization     {info.file_type}   [{mix}]",
        f"  file size        {human_bytes(info.file_size)}" + (f" in {len(info.split_files)} parts" if info.split_files else ""),
        f"  trained context  {info.context_length:,} tokens",
        f"  layers           {info.block_count}, embedding {info.embedding_length}, vocab {info.vocab_size:,}",
        f"  attention        {info.head_count} heads, {_kv_heads(info)} KV heads, head dim {info.key_length}"
        + (f", sliding window {info.sliding_window}" if info.sliding_window else ""),
        f"  KV cache/token   {kv}",
    ]
    if info.expert_count:
        lines.append(f"  experts          {info.expert_used_count or '?'} of {info.expert_count} per token")
    if info.chat_template:
        lines.append(f"  chat template    {len(info.chat_template):,} characters")
    if info.bos_token or info.eos_token:
        lines.append(f"  BOS / EOS        {info.bos_token!r} / {info.eos_token!r}")
    return "\n".join(lines)


def _kv_heads(info: ModelInfo) -> str:
    distinct = sorted(set(info.head_count_kv))
    return str(distinct[0]) if len(distinct) == 1 else f"{distinct[0]}-{distinct[-1]}"


def describe_plan(plan: FitPlan) -> str:
    words = verdict_text(plan.verdict)
    verdict = words[0].lower() + words[1:]
    if plan.refusal:
        verdict = f"will not load: {plan.refusal}"
    elif plan.shortfall_bytes:
        verdict += f" (short by {human_bytes(plan.shortfall_bytes)})"
    lines = [
        f"Fit on this machine: {verdict}",
        f"  context {plan.context:,} tokens ({plan.kv_type} KV cache, flash attention "
        f"{'on' if plan.flash_attn else 'off'}); largest that fits: {plan.max_context:,}",
        f"  GPU layers {plan.n_gpu_layers} of {plan.n_layers + 1} (with the output layer), threads {plan.threads}",
        f"  {plan.parallel} parallel slot{'s' if plan.parallel > 1 else ''}, each with its own context",
        f"  drafting: {drafting_text(plan)}",
        f"  same request, same reply: {replies_text(plan)}",
    ]
    for use in [*plan.gpus, plan.ram]:
        lines.append(f"  {use.name:<10} {human_bytes(use.total_bytes):>10} of {human_bytes(use.available_bytes)} "
                     f"available  (weights {human_bytes(use.weights_bytes)}, KV {human_bytes(use.kv_bytes)}, "
                     f"compute {human_bytes(use.compute_bytes)}, reserve {human_bytes(use.reserve_bytes)})")
    lines += [f"  note: {n}" for n in plan.notes]
    return "\n".join(lines)
