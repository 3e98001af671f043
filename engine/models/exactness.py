"""Exact replies: the attention a load gets (its KV cache's type and flash attention) and the kernels its
weights are multiplied by, chosen so that on the CPU a greedy or seeded reply is a function of the request
alone, and whether a plan's replies are exact, in words (``fireside info``).

``kv_for`` says why the KV cache's type decides it, ``BATCH_VARIANT_TYPES`` which weights also need the
one-row kernels. The planner (``planner.py``) has ``choose_attention`` decide a load's options and
``keep_exact`` mark its plan. Pure functions over values; safe on any thread.
"""

from __future__ import annotations

from dataclasses import replace

from .fitplan import FitPlan, LoadOptions
from .inspection import ModelInfo

EXACT_KV = "q8_0"  # the KV cache type whose attention is computed the same way for any batch and thread count


def kv_fits(info: ModelInfo, kv_type: str) -> bool:
    """Whether ``info``'s attention heads can be stored in a ``kv_type`` cache: llama.cpp refuses to
    create a context whose head size is not a whole number of the type's blocks (32 values)."""
    return kv_type == "f16" or (info.key_length % 32 == 0 and info.value_length % 32 == 0)


def kv_for(o: LoadOptions, gpus: bool, info: ModelInfo) -> str:
    """The KV cache type a load uses: the user's, or for ``auto`` the one that keeps replies exact.

    With an f16 cache, llama.cpp's CPU flash attention takes one of three paths by the work's shape:
    prompt chunks of 64 or more tokens a stream go through a tiled kernel, a lone stream's next token
    at 512 cells or more has its cache split between the threads (by their count), and everything
    else one row at a time over the whole cache. Each rounds differently (logits moved by up to 1.2
    on the starter), so a reply depended on how its prompt was chunked (cold or cached), on the
    thread count the machine's load chose, and on the other streams and drafts in its steps. A
    quantized cache takes the row path for every shape, so a token's numbers are a function of the
    tokens before it alone (tests/server/test_same_reply.py); q8_0 also halves the cache.
    GPU backends choose kernels by batch size whatever the cache holds, so there ``auto`` keeps f16,
    and so it does with flash attention turned off (a quantized V cache needs it) and for heads that
    a quantized cache cannot hold (``kv_fits``)."""
    if o.kv_type != "auto":
        return o.kv_type
    return "f16" if gpus or o.flash_attn is False or not kv_fits(info, EXACT_KV) else EXACT_KV


# weight types that llama.cpp's CPU multiplies by a kernel chosen by the batch's rows: the tiled kernel
# (ggml-cpu/tiled, 8 rows and more) and, for Q4_K and Q2_K, the repacked gemm (4 rows and more, an extra
# buffer type), each rounding otherwise than the one-row kernel a decoded token takes. Q4_0, Q4_1, Q5_0 and
# Q8_0 round the same in any batch (bench/batch_invariance.py, issue 50)
BATCH_VARIANT_TYPES = frozenset({"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                                 "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"})
# and those whose batches of 2 rows and more take llamafile's sgemm, built in and with no switch at run time:
# an IQ4_NL copy of the starter DIFFERED from its first batched token with the other two switches off
SGEMM_VARIANT_TYPES = frozenset({"IQ4_NL"})


ROW_KERNELS_NOTE = (" weights are multiplied row by row, as one token is, so replies stay exact (prompts evaluate "
                    "slower; an f16 KV cache lifts both)")


def batch_variant_weights(info: ModelInfo, types: frozenset[str] = BATCH_VARIANT_TYPES) -> list[str]:
    """The model's weight types whose batched kernels round otherwise than a single row's, largest first."""
    return [t for t in info.quant_mix if t in types]


def keep_exact(plan: FitPlan, info: ModelInfo) -> None:
    """An exact plan for a model with batch-variant weights multiplies them by the one-row kernels, and says
    so; weights no switch can keep exact make the plan's replies not guaranteed instead (``replies_text``)."""
    if not exact_replies(plan):
        return
    plan.inexact_weights = batch_variant_weights(info, SGEMM_VARIANT_TYPES)
    variant = batch_variant_weights(info)
    if variant and not plan.inexact_weights:
        plan.row_kernels = True
        plan.notes.append(f"{', '.join(variant)}{ROW_KERNELS_NOTE}")


def exact_replies(plan: FitPlan) -> bool:
    """Whether this load's greedy and seeded replies are a function of the request alone (kv_for)."""
    return plan.kv_type != "f16" and plan.flash_attn and plan.n_gpu_layers == 0 and not plan.inexact_weights


def replies_text(plan: FitPlan) -> str:
    """Whether a greedy or seeded request gets the same reply every time, in words (``fireside info``)."""
    if exact_replies(plan):
        return ("yes: greedy and seeded replies do not depend on the machine's load, the thread count, other "
                "streams, drafts or the prompt cache")
    if plan.n_gpu_layers:
        why = "GPU kernels are chosen by batch size"
    elif not plan.flash_attn:
        why = "flash attention is off"
    elif plan.inexact_weights:
        why = (f"{', '.join(plan.inexact_weights)} weights are multiplied in batches by llama.cpp's built-in "
               "sgemm, which rounds otherwise than one token's kernel")
    else:
        why = "an f16 KV cache is attended by kernels chosen by batch size and thread count"
    return f"not guaranteed ({why}); a reply may change with the load, other streams and the prompt cache"


def choose_attention(info: ModelInfo, o: LoadOptions, gpus: bool, notes: list[str]) -> tuple[LoadOptions, bool, str | None]:
    """The options with the KV cache's type decided (``kv_for``), flash attention on or off, and a
    refusal when llama.cpp would refuse the pair for this model."""
    chosen, o = o.kv_type != "auto", replace(o, kv_type=kv_for(o, gpus, info))
    flash, refusal = _flash_attention(o, notes if chosen else [])  # auto chose it: nothing to explain
    if not refusal and not kv_fits(info, o.kv_type):
        refusal = (f"its attention heads ({info.key_length} and {info.value_length} values) cannot be stored in a "
                   f"{o.kv_type} KV cache, whose blocks hold 32; use an f16 KV cache (or auto)")
    return o, flash, refusal


def _flash_attention(o: LoadOptions, notes: list[str]) -> tuple[bool, str | None]:
    """Flash attention on or off, and a refusal when the options break llama.cpp's rule that a quantized
    V cache needs flash attention (without it, creating the context fails at any size).

    On by default, as llama-server's "auto" resolves on CPUs and current GPUs: faster prompts, a smaller
    compute buffer, and attention that skips other slots' cells instead of summing their zeros, which
    keeps a sequence's numerics (and so its seeded text) independent of the others."""
    if o.kv_type == "f16":
        return (o.flash_attn if o.flash_attn is not None else True), None
    if o.flash_attn is None:
        notes.append(f"flash attention turned on: llama.cpp needs it for a quantized ({o.kv_type}) KV cache")
        return True, None
    if o.flash_attn:
        return True, None
    return False, (f"a quantized ({o.kv_type}) KV cache needs flash attention, which is turned off; turn flash "
                   f"attention on (or leave it on auto), or use an f16 KV cache")
