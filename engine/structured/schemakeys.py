"""The JSON-schema keywords llama-cpp-python's converter ignores, kept by the grammar or refused.

The converter turns ``type``, ``properties``, ``items``, ``enum``, ``const``, ``pattern``, string
lengths and a few formats into grammar rules, and silently drops the rest: a ``year`` with
``minimum: 1900`` admitted 3500. ``keep`` runs before the converter's own ``visit`` on every node
(``StrictConverter.visit``) and handles what it would drop: integer and number bounds become
digit-range rules (an integer range is exact; a number's integer part is exact and a fraction at a
fractional bound is checked after generation), an integer ``multipleOf`` over a short range becomes
the list of its values, ``email`` and ``uri`` formats get rules, a type list keeps the node's other
keywords on each branch, and arrays and free-form objects keep their item and property counts. A
keyword no grammar here can keep, and that most replies would break (``not``, ``if``, ``contains``,
``patternProperties``...), is refused with a ``GrammarRejected`` (HTTP 400) naming it and where.
What the grammar keeps only partly (``uniqueItems``, a number's ``multipleOf``, a date's day of the
month) is checked after generation by ``replycheck.py``; docs/api.md has the table.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from ..errors import GrammarRejected

REFUSED = ("not", "if", "then", "else", "contains", "minContains", "maxContains", "patternProperties",
           "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedProperties",
           "unevaluatedItems")
# formats JSON Schema defines that no rule here keeps; other names are annotations (``password``)
REFUSED_FORMATS = ("ipv4", "ipv6", "hostname", "idn-hostname", "idn-email", "iri", "iri-reference",
                   "uri-reference", "uri-template", "json-pointer", "relative-json-pointer", "regex",
                   "duration")
BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
ANY = {"type": ["string", "number", "boolean", "null"]}  # items of any scalar type ({} reads as no items)
MAX_DIGITS = 16        # digits of an unbounded integer part, as the converter's own number rule
MAX_FRACTION = 15      # digits after the point
ENUMERATED_MULTIPLES = 64  # an integer multipleOf over a range of at most this many values is listed

EMAIL = ('"\\"" [a-zA-Z0-9._%+-]+ "@" [a-zA-Z0-9] [a-zA-Z0-9-]* ("." [a-zA-Z0-9] [a-zA-Z0-9-]*)+ '
         '"\\"" space')
URI = ('"\\"" [a-zA-Z] [a-zA-Z0-9+.-]* ":" [a-zA-Z0-9._~:/?#@!$&\'()*+,;=%-]+ "\\"" space')


def refuse(where: str, message: str) -> GrammarRejected:
    return GrammarRejected(f"the JSON schema cannot be enforced: {where} {message}", "unsupported")


def keep(converter, schema: dict[str, Any], name: str) -> str | None:
    """The rule for ``schema`` when it uses a keyword the converter would drop, else None (the
    converter's own ``visit`` handles it). Raises ``GrammarRejected`` for a keyword no rule keeps."""
    if not isinstance(schema, dict):
        return None
    where = f"#/{name}" if name else "#"
    for key in REFUSED:
        if key in schema:
            raise refuse(f"{where}/{key}:", f"the {key!r} keyword is not supported (no grammar keeps it)")
    fmt = schema.get("format")
    if fmt in REFUSED_FORMATS:
        raise refuse(f"{where}/format:", f"the {fmt!r} format is not supported (supported: date, time, "
                                         "date-time, uuid, email, uri)")
    _check_counts(schema, where)
    rule_name = name + "-" if name in _reserved() else name or "root"
    kind = schema.get("type")
    if "$ref" in schema or "const" in schema or "enum" in schema or "anyOf" in schema or "oneOf" in schema:
        return None
    if isinstance(kind, list):
        rest = {k: v for k, v in schema.items() if k != "type"}
        return converter.visit({"anyOf": [{**rest, "type": t} for t in kind]}, name)
    if kind in ("integer", "number") and any(k in schema for k in BOUND_KEYS):
        body = integer_rule(schema, where) if kind == "integer" else number_rule(schema, where)
        return converter._add_rule(rule_name, f"({body}) space")
    if kind in (None, "string") and fmt in ("email", "uri") and "pattern" not in schema:
        return converter._add_rule(rule_name, EMAIL if fmt == "email" else URI)
    if kind == "array" and "items" not in schema and "prefixItems" not in schema \
            and ("minItems" in schema or "maxItems" in schema):
        return converter.visit({**schema, "items": ANY}, name)
    if kind == "object" and "properties" not in schema and ("minProperties" in schema or "maxProperties" in schema):
        return _counted_object(converter, schema, name, rule_name)
    return None


COUNTS = (("minItems", "maxItems"), ("minLength", "maxLength"), ("minProperties", "maxProperties"))


def _check_counts(schema: dict[str, Any], where: str) -> None:
    """Refuse a count range no value can meet (``minItems: 2, maxItems: 1``): the grammar would still
    let the model write something, which the reply check then failed with a 500 the client caused."""
    for low, high in COUNTS:
        lo, hi = schema.get(low), schema.get(high)
        if _is_number(lo) and _is_number(hi) and lo > hi:
            raise refuse(f"{where}/{low}:", f"{lo} is more than {high} {hi}, so no value can match")


def _reserved() -> set[str]:
    from llama_cpp.llama_grammar import RESERVED_NAMES

    return RESERVED_NAMES


def _counted_object(converter, schema: dict[str, Any], name: str, rule_name: str) -> str:
    from llama_cpp.llama_grammar import PRIMITIVE_RULES, _build_repetition

    extra = schema.get("additionalProperties", True)
    if extra is False:
        low = schema.get("minProperties", 0)
        if low > 0:
            raise refuse(f"#/{name}/minProperties:" if name else "#/minProperties:",
                         f"asks for {low} properties of an object that allows none")
        return converter._add_rule(rule_name, '"{" space "}" space')
    value = converter.visit({} if extra is True else extra, f"{name}{'-' if name else ''}additional-value")
    key = converter._add_primitive("string", PRIMITIVE_RULES["string"])
    kv = converter._add_rule(f"{name}{'-' if name else ''}additional-kv", f'{key} ":" space {value}')
    low, high = int(schema.get("minProperties", 0)), schema.get("maxProperties")
    body = _build_repetition(kv, low, None if high is None else int(high), separator_rule='"," space')
    return converter._add_rule(rule_name, f'"{{" space {body} "}}" space')


# --- integers ------------------------------------------------------------------------------------------

def _bounds(schema: dict[str, Any]) -> tuple[tuple[Decimal, bool] | None, tuple[Decimal, bool] | None]:
    """(low, exclusive?) and (high, exclusive?), either None; drafts 4 (boolean exclusives) and 6+."""
    low = high = None
    if _is_number(schema.get("minimum")):
        low = (_dec(schema["minimum"]), schema.get("exclusiveMinimum") is True)
    if _is_number(schema.get("maximum")):
        high = (_dec(schema["maximum"]), schema.get("exclusiveMaximum") is True)
    if _is_number(schema.get("exclusiveMinimum")):
        value = _dec(schema["exclusiveMinimum"])
        low = (value, True) if low is None or value >= low[0] else low
    if _is_number(schema.get("exclusiveMaximum")):
        value = _dec(schema["exclusiveMaximum"])
        high = (value, True) if high is None or value <= high[0] else high
    return low, high


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _dec(value: float) -> Decimal:
    return Decimal(str(value))


def integer_limits(schema: dict[str, Any]) -> tuple[int | None, int | None]:
    """The smallest and largest integers the bounds allow (None: unbounded on that side)."""
    low, high = _bounds(schema)
    lo = None if low is None else (math.floor(low[0]) + 1 if low[1] and low[0] == math.floor(low[0])
                                   else math.ceil(low[0]))
    hi = None if high is None else (math.ceil(high[0]) - 1 if high[1] and high[0] == math.ceil(high[0])
                                    else math.floor(high[0]))
    return lo, hi


def integer_rule(schema: dict[str, Any], where: str) -> str:
    """A grammar expression (no trailing space) for the integers the schema allows."""
    lo, hi = integer_limits(schema)
    if lo is not None and hi is not None and lo > hi:
        raise refuse(f"{where}:", f"no integer lies within its bounds ({lo} > {hi})")
    step = schema.get("multipleOf")
    if _is_number(step) and step > 0 and float(step).is_integer() and lo is not None and hi is not None:
        step = int(step)
        first = -(-lo // step) * step
        values = range(first, hi + 1, step)
        if not values:
            raise refuse(f"{where}:", f"no multiple of {step} lies within its bounds")
        if len(values) <= ENUMERATED_MULTIPLES:
            return " | ".join(f'"{v}"' for v in values)
    return int_range(lo, hi)


def int_range(lo: int | None, hi: int | None) -> str:
    """A grammar expression for the integers in [lo, hi] written as JSON writes them (no leading zeros,
    no ``-0``); None on a side means unbounded there (up to ``MAX_DIGITS`` digits)."""
    if lo is None and hi is None:
        return '"-"? ("0" | [1-9] [0-9]{0,15})'
    if hi is not None and hi < 0:
        return f'"-" ({_natural_range(-hi, None if lo is None else -lo)})'
    parts = []
    if lo is None or lo < 0:
        parts.append(f'"-" ({_natural_range(1, None if lo is None else -lo)})')
    parts.append(_natural_range(max(lo or 0, 0), hi))
    return " | ".join(f"({p})" for p in parts)


def _natural_range(lo: int, hi: int | None) -> str:
    """Naturals in [lo, hi] (hi None: any up to ``MAX_DIGITS`` digits), split by digit count."""
    if hi is None:  # lo's own length, then any longer number in one alternative
        longer = f"[1-9] [0-9]{{{len(str(lo))},{MAX_DIGITS - 1}}}" if len(str(lo)) < MAX_DIGITS else None
        return " | ".join(p for p in (_natural_range(lo, 10 ** len(str(lo)) - 1), longer) if p)
    parts = []
    for digits in range(len(str(lo)), len(str(hi)) + 1):
        a = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        b = min(hi, 10 ** digits - 1)
        if a <= b:
            parts.append(_same_length(str(a), str(b)))
    return " | ".join(parts)


def _same_length(a: str, b: str) -> str:
    """Digit strings of one length between ``a`` and ``b`` inclusive."""
    if len(a) == 1:
        return _digits(a, b)
    rest = len(a) - 1
    if a[1:] == "0" * rest and b[1:] == "9" * rest:
        return f"{_digits(a[0], b[0])} [0-9]{{{rest}}}"
    if a[0] == b[0]:
        return f'"{a[0]}" ({_same_length(a[1:], b[1:])})'
    whole_top = b[1:] == "9" * rest  # b's first digit takes every tail: one class with the middle
    parts = [f'"{a[0]}" ({_same_length(a[1:], "9" * rest)})']
    middle_top = int(b[0]) if whole_top else int(b[0]) - 1
    if int(a[0]) + 1 <= middle_top:
        parts.append(f"{_digits(str(int(a[0]) + 1), str(middle_top))} [0-9]{{{rest}}}")
    if not whole_top:
        parts.append(f'"{b[0]}" ({_same_length("0" * rest, b[1:])})')
    return " | ".join(parts)


def _digits(a: str, b: str) -> str:
    return f'"{a}"' if a == b else f"[{a}-{b}]"


# --- numbers -------------------------------------------------------------------------------------------

FRACTION = '"." "0"{0,14} [1-9] [0-9]{0,14}'  # a fraction that is not zero: its value lies strictly inside


def number_rule(schema: dict[str, Any], where: str) -> str:
    """A grammar expression for the numbers within the bounds, with no exponent: an integer in range
    (with an optional ``.0``), or ``k.f`` / ``-k.f`` for every whole part ``k`` whose open interval
    (k, k+1) touches the range. Exact for whole bounds; at a fractional bound the fraction is checked
    after generation (``replycheck``)."""
    low, high = _bounds(schema)
    ilo, ihi = integer_limits(schema)
    parts = []
    if ilo is None or ihi is None or ilo <= ihi:
        parts.append(f'({int_range(ilo, ihi)}) ("." "0"{{1,{MAX_FRACTION}}})?')
    lo = None if low is None else low[0]
    hi = None if high is None else high[0]
    # k.f lies in (k, k+1): k from floor(lo), up to the last k with k < hi
    pos_lo = max(0, math.floor(lo)) if lo is not None else 0
    pos_hi = None if hi is None else math.ceil(hi) - 1
    if pos_hi is None or pos_lo <= pos_hi:
        parts.append(f"({_natural_range(pos_lo, pos_hi)}) {FRACTION}")
    # -k.f lies in (-(k+1), -k): k from floor(-hi), up to the last k with -(k+1) < lo
    neg_lo = max(0, math.floor(-hi)) if hi is not None else 0
    neg_hi = None if lo is None else math.ceil(-lo) - 1
    if neg_hi is None or neg_lo <= neg_hi:
        parts.append(f'"-" ({_natural_range(neg_lo, neg_hi)}) {FRACTION}')
    if not parts:
        raise refuse(f"{where}:", "no number lies within its bounds")
    return " | ".join(f"({p})" for p in parts)
