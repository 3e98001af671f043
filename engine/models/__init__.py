"""Knowing a model before loading it: GGUF inspection (``inspection.py`` over the header reader,
``header.py``), this machine's hardware (``hardware.py``), the fit planner (``planner.py``; its options and
plan are ``fitplan.py``'s, the attention that keeps replies exact ``exactness.py``'s) and vision
projectors (``projector.py``); ``bert.py`` writes the built-in embedder's GGUF.

Offers the names in ``__all__``; each loads its module on first use.
"""

from __future__ import annotations

from ..faces import lazy

# name -> the inner module that holds it (a name equal to its module's is the module itself)
_WHERE = {
    "inspection": "inspection",
    "inspect_file": "inspection",
    "KV_TYPE_BYTES": "inspection",
    "ModelInfo": "inspection",
    "split_parts": "inspection",
    "SPLIT_RE": "inspection",
    "hardware": "hardware",
    "engine_build": "hardware",
    "Device": "hardware",
    "Hardware": "hardware",
    "DEFAULT_PARALLEL": "fitplan",
    "drafting_text": "fitplan",
    "FitPlan": "fitplan",
    "kv_fits": "exactness",
    "LoadOptions": "fitplan",
    "device_names": "fitplan",
    "plan_fit": "planner",
    "replies_text": "exactness",
    "verdict_text": "fitplan",
    "VERDICT_WORDS": "fitplan",
    "with_attention": "planner",
    "with_lane": "planner",
    "with_draft": "planner",
    "with_projector": "planner",
    "best": "projector",
    "from_header": "projector",
    "pair": "projector",
    "read_projector": "projector",
    "kind": "files",
    "not_regular": "files",
    "read_small": "files",
    "MEAN": "bert",
    "vocabulary": "bert",
    "write_bert": "bert",
}
__all__ = ["DEFAULT_PARALLEL", "Device", "FitPlan", "Hardware", "KV_TYPE_BYTES", "LoadOptions", "MEAN", "ModelInfo",
           "SPLIT_RE", "VERDICT_WORDS", "best", "device_names", "drafting_text", "engine_build", "from_header", "hardware",
           "inspect_file", "inspection", "kind", "kv_fits", "not_regular", "pair", "plan_fit",
           "read_projector", "read_small", "replies_text", "split_parts", "verdict_text", "vocabulary",
           "with_attention", "with_draft", "with_lane", "with_projector", "write_bert"]
__getattr__, __dir__ = lazy(__name__, _WHERE)
