"""Ollama's ``options``, typed as Ollama types them (``api/types.go``: ``Options`` and its ``Runner``).

Ollama reads ``options`` into a Go struct: an integer option takes any JSON number (a fraction is cut
off), a float option any number, a boolean only ``true``/``false``, ``stop`` only an array of strings;
anything else is a 400 naming the option ("option \\"num_ctx\\" must be of type integer"). So here, with
a string where a number belongs (``num_ctx: "big"``, ``temperature: "0.5"``) or a number where a
boolean belongs refused the same way, as a 400 naming ``options.NAME``. Fireside also takes ``stop``
as one string, as the other dialects do. The sampling options are honoured (``SAMPLING_NAMES`` maps
them onto the engine's ``Sampling``); the load settings (``num_ctx``, ``num_gpu``, ``num_thread``...:
a model is loaded once, as the fit planner chose, for every client) and those Ollama itself no longer
reads (``tfs_z``, ``penalize_newline``, ``num_keep``) are checked and ignored. An option Ollama does
not know is ignored with a warning in the log, as Ollama does.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, Strict, model_validator

from .validation import INT32, Body, Stop

log = logging.getLogger(__name__)

SAMPLING_NAMES = {"num_predict": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
                  "min_p": "min_p", "seed": "seed", "stop": "stop", "repeat_penalty": "repeat_penalty",
                  "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
                  "repeat_last_n": "repeat_last_n", "typical_p": "typical_p", "mirostat": "mirostat",
                  "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"}


def _integer(value: Any) -> Any:
    """Ollama's integer: a JSON number, its fraction cut off; never a string or a boolean."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be of type integer, not {type(value).__name__}")
    return int(value)


def _float(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be of type float, not {type(value).__name__}")
    return float(value)


def Int(low: int, high: int = INT32) -> Any:  # noqa: N802 (a type, spelt as one)
    return Annotated[int, BeforeValidator(_integer), Field(ge=low, le=high)]


def Float(low: float, high: float) -> Any:  # noqa: N802
    return Annotated[float, BeforeValidator(_float), Field(ge=low, le=high)]


Flag = Annotated[bool, Strict()]
LOAD_INT = Int(-INT32 - 1)  # load settings are ignored, so any integer Ollama would read is taken


class Options(Body):
    # sampling, honoured
    num_predict: Int(-2) | None = None  # -1, -2: until the model stops
    temperature: Float(0, 100) | None = None
    top_p: Float(0, 1) | None = None
    top_k: Int(0) | None = None
    min_p: Float(0, 1) | None = None
    seed: Int(-1, 2**32 - 1) | None = None  # llama.cpp's seed is a uint32; -1 means random
    stop: Stop | None = None
    repeat_penalty: Float(-100, 100) | None = None
    frequency_penalty: Float(-100, 100) | None = None
    presence_penalty: Float(-100, 100) | None = None
    repeat_last_n: Int(-1) | None = None  # -1: the whole context; 0: no penalties
    typical_p: Float(0, 1) | None = None
    mirostat: Int(0, 2) | None = None
    mirostat_tau: Float(0, 100) | None = None
    mirostat_eta: Float(0, 1) | None = None
    # load settings and options Ollama no longer reads: typed, then ignored
    num_ctx: LOAD_INT | None = None
    num_batch: LOAD_INT | None = None
    num_gpu: LOAD_INT | None = None
    main_gpu: LOAD_INT | None = None
    num_thread: LOAD_INT | None = None
    num_keep: LOAD_INT | None = None
    numa: Flag | None = None
    low_vram: Flag | None = None
    f16_kv: Flag | None = None
    use_mmap: Flag | None = None
    use_mlock: Flag | None = None
    vocab_only: Flag | None = None
    logits_all: Flag | None = None
    embedding_only: Flag | None = None
    penalize_newline: Flag | None = None
    tfs_z: Float(-1e9, 1e9) | None = None

    @model_validator(mode="after")
    def _warn_unknown(self) -> Options:
        for name in self.model_extra or {}:
            log.warning("ignoring an unknown Ollama option %r (Ollama ignores it too)", name)
        return self

    def sampling_fields(self) -> dict[str, Any]:
        """The options given that sampling honours, under the engine's ``Sampling`` names."""
        given = self.model_dump(exclude_none=True)
        return {SAMPLING_NAMES[k]: v for k, v in given.items() if k in SAMPLING_NAMES}
