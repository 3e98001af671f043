"""Every reply written under a JSON schema is checked against it once it has ended.

The grammar (``grammar.py``, ``strictjson.py``, ``schemakeys.py``) keeps most keywords exactly, but a
few only partly: ``uniqueItems``, a number's ``multipleOf``, a fractional bound, the day of a month in
a ``date``, ``minProperties`` on an object with named properties, ``oneOf`` (held as ``anyOf``). So a
reply that ended on its own (finish ``stop``) is validated with ``jsonschema`` against the schema the
client gave, formats included, and one that does not match raises ``SchemaMismatch``: the client gets
an error naming the first keyword broken and where, never an invalid reply that says ``stop``. A reply
the token limit cut says ``length`` already and is left as it is.

``expected_schema`` says which schema a request's reply must match (the client's ``json_schema``, or
the call schema of a forced tool). Runs on the caller's thread; pure computation.
"""

from __future__ import annotations

import datetime
import json
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from ..errors import SchemaMismatch
from ..types import ChatRequest
from .grammar import forced_tool_names, tool_call_schema

_TIME = re.compile(r"^([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_EMAIL = re.compile(r"^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9][a-zA-Z0-9-]*(\.[a-zA-Z0-9][a-zA-Z0-9-]*)+$")
_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:[^\s\"<>\\^`{|}]+$")


def expected_schema(request: ChatRequest) -> dict[str, Any] | None:
    """The schema the reply's text must match, or None when nothing constrains it to a schema."""
    forced = forced_tool_names(request) if request.tool_choice != "none" else None
    if forced:
        return tool_call_schema(request, forced)
    return request.json_schema


def check_reply(schema: dict[str, Any], text: str) -> None:
    """Raise ``SchemaMismatch`` unless ``text`` is JSON that matches ``schema``."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SchemaMismatch(f"the reply is not valid JSON ({exc}), so it does not match the JSON schema") \
            from None
    error = _first_error(schema, value)
    if error is not None:
        raise SchemaMismatch(f"the reply does not match the JSON schema: {error}")


def _first_error(schema: dict[str, Any], value: Any) -> str | None:
    """The first way ``value`` breaks ``schema`` as a sentence, or None when it matches."""
    validator = _validator(schema)
    error = next(iter(sorted(validator.iter_errors(value), key=lambda e: len(e.path))), None)
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{error.message} (keyword {error.validator!r} at #/{where})"


def _validator(schema: dict[str, Any]):
    from jsonschema import FormatChecker, validators

    base = validators.validator_for(schema, default=validators.Draft202012Validator)
    checker = FormatChecker(formats=())
    for name, test in _FORMATS.items():
        checker.checks(name)(test)
    kind = validators.extend(base, {"multipleOf": _multiple_of, "pattern": _pattern_keyword})
    return kind(schema, format_checker=checker)


def _multiple_of(validator, step, instance, schema):
    """``multipleOf`` in decimal arithmetic: jsonschema divides floats, so 0.07 was no multiple of 0.01."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "number"):
        return
    try:
        whole = (Decimal(str(instance)) / Decimal(str(step))) % 1 == 0
    except (InvalidOperation, ZeroDivisionError):
        whole = False
    if not whole:
        yield ValidationError(f"{instance!r} is not a multiple of {step}")


def _pattern_keyword(validator, pattern, instance, schema):
    """``pattern`` as ECMA-262 (JSON Schema's dialect) and the grammar read it, in Python's ``re``
    (``python_pattern``); skipped where ``re`` still cannot read it: the grammar kept it as llama.cpp
    reads it, so the reply already matches it, and a 500 from ``re.error`` helped no one."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "string"):
        return
    try:
        found = re.search(python_pattern(pattern), instance)
    except re.error:
        return
    if found is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def python_pattern(pattern: str) -> str:
    """``pattern`` with ECMA-262's two classes Python reads otherwise spelled Python's way: ``[^]`` (any
    character; to ``re`` it opens a class whose first member is ``]``) as ``[\\s\\S]``, and ``[]``
    (nothing) as ``(?!)``. The 10-minute server fuzz run had ``^[^]{,1}[a-z]$`` replies, which match it
    as the grammar and ECMA read it, refused as schema mismatches (500s)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if not in_class and pattern.startswith("[^]", i):
            out.append("[\\s\\S]")
            i += 3
            continue
        if not in_class and pattern.startswith("[]", i):
            out.append("(?!)")
            i += 2
            continue
        in_class = (in_class and c != "]") or (not in_class and c == "[")
        out.append(c)
        i += 1
    return "".join(out)


def _date(text: object) -> bool:
    if not isinstance(text, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return False
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _date_time(text: object) -> bool:
    if not isinstance(text, str):
        return True
    day, sep, clock = text.partition("T") if "T" in text else text.partition("t")
    return bool(sep) and _date(day) and _time(clock)


def _time(text: object) -> bool:
    return not isinstance(text, str) or bool(_TIME.match(text))


def _pattern(regex: re.Pattern):
    return lambda text: not isinstance(text, str) or bool(regex.match(text))


_FORMATS = {"date": _date, "time": _time, "date-time": _date_time, "uuid": _pattern(_UUID),
            "email": _pattern(_EMAIL), "uri": _pattern(_URI)}
