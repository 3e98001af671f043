"""What every request body must be before a dialect reads it: strict JSON, and the typed fields the
dialects' pydantic models are built from.

Two layers. ``json_problem`` runs in the security middleware on the raw bytes: the body must be JSON
with only finite numbers (no ``NaN``, ``Infinity`` or ``1e999``), no lone UTF-16 surrogate in any
string (``"\\ud800"`` decodes in Python but cannot be encoded for the tokenizer) and at most
``MAX_DEPTH`` levels of nesting. Then each dialect declares its bodies with the ``Body`` base and the
field types below (bounded integers, finite floats, capped stop strings), so a wrong type or value is
a ``RequestValidationError`` that ``errors.py`` turns into a 400 naming the field, in the dialect's
shape, before anything reaches the runtime. Unknown fields are allowed, as every dialect's clients
send extras this server ignores.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_DEPTH = 64  # JSON schemas and tool parameters nest a few levels; 64 is far past any real one
INT32 = 2**31 - 1
MAX_STOP_CHARS = 1000

Count = Annotated[int, Field(ge=0, le=INT32)]  # top_k, and the like: llama.cpp reads a C int
Tokens = Annotated[int, Field(ge=1, le=INT32)]  # max_tokens
Seed = Annotated[int, Field(ge=-1, le=2**32 - 1)]  # llama.cpp's seed is a uint32; -1 means random
Unit = Annotated[float, Field(ge=0, le=1)]  # top_p, min_p
Penalty = Annotated[float, Field(ge=-100, le=100)]
Temperature = Annotated[float, Field(ge=0, le=100)]
StopText = Annotated[str, Field(max_length=MAX_STOP_CHARS)]
Stop = StopText | list[StopText]
Name = Annotated[str, Field(min_length=1, max_length=256)]


class Body(BaseModel):
    """Base of every request model: extras allowed (and ignored), non-finite floats refused."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class Function(Body):
    name: Name
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(Body):
    """A function tool, the same in OpenAI's and Ollama's requests."""

    type: Literal["function"] = "function"
    function: Function


def dumped(value: Any) -> Any:
    """A validated model (or list of them) as the plain JSON the engine and helpers take."""
    if isinstance(value, list):
        return [dumped(v) for v in value]
    return value.model_dump(exclude_none=True, by_alias=True) if isinstance(value, Body) else value


class JsonProblem(ValueError):
    """The body is not the strict JSON this server takes; ``where`` is the field's dotted path."""

    def __init__(self, message: str, where: str = ""):
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where


def json_problem(body: bytes) -> JsonProblem | None:
    """Why ``body`` is not strict JSON, or None when it is."""
    try:
        value = json.loads(body)  # NaN, Infinity and 1e999 parse to floats that _walk then refuses
    except RecursionError:
        return JsonProblem(f"the body nests deeper than {MAX_DEPTH} levels")
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, bad UTF-8, a 5,000-digit integer
        return JsonProblem(f"the body is not valid JSON ({exc})")
    return _walk(value, [], 0)


def _walk(value: Any, path: list[str], depth: int) -> JsonProblem | None:
    if depth > MAX_DEPTH:
        return JsonProblem(f"the body nests deeper than {MAX_DEPTH} levels", ".".join(path))
    if isinstance(value, str):
        return None if _encodable(value) else JsonProblem("the text holds a lone UTF-16 surrogate "
                                                          "(invalid Unicode)", ".".join(path))
    if isinstance(value, float) and not math.isfinite(value):
        return JsonProblem(f"{value} is not a number this server takes (numbers must be finite)", ".".join(path))
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        where = [*path, str(key)]
        if isinstance(key, str) and not _encodable(key):
            return JsonProblem("a key holds a lone UTF-16 surrogate (invalid Unicode)", ".".join(path))
        if problem := _walk(item, where, depth + 1):
            return problem
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
