"""Random JSON schemas built from the value-constraining keywords of issue 27, shared by the test run and
``bench/schema_keywords.py``.

``schemas`` draws a schema (integers and numbers with bounds and ``multipleOf``, strings with lengths,
formats, a pattern, ``enum`` and ``const``, arrays with counts and ``uniqueItems``, objects with
required properties or property counts). ``values`` draws values shaped like a schema but with leaves
near and past its bounds, so a grammar that admits too much is caught offline: ``admitted_but_invalid``
lists the values a schema's grammar admits that ``jsonschema`` refuses. ``ask`` runs one schema through
the real model and says how the reply ended: ``refused`` (a 400 before generation), ``valid``,
``length`` (cut by the token limit) or ``mismatch`` (the reply was refused after generation); an
invalid reply that says ``stop`` raises, which is what the property forbids.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from hypothesis import strategies as st

from fireside.engine.errors import GrammarRejected, SchemaMismatch
from fireside.engine.structured.grammar import checked, schema_grammar
from fireside.engine.types import ChatRequest, Sampling
from tests.helpers.gbnf_regex import admits

# keywords the grammar keeps only partly: a value they refuse may pass the grammar (validated after)
PARTLY = ("uniqueItems", "format", "minProperties", "maxProperties", "multipleOf")
small = st.integers(-2500, 2500)


@st.composite
def _integer(draw) -> dict:
    schema: dict[str, Any] = {"type": "integer"}
    for key in draw(st.sets(st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]))):
        schema[key] = draw(small)
    if draw(st.booleans()) and draw(st.booleans()):
        schema["multipleOf"] = draw(st.integers(1, 12))
    return schema


@st.composite
def _number(draw) -> dict:
    schema: dict[str, Any] = {"type": "number"}
    bound = st.one_of(small, st.integers(-400, 400).map(lambda n: n / 4))
    for key in draw(st.sets(st.sampled_from(["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]))):
        schema[key] = draw(bound)
    if draw(st.booleans()) and draw(st.booleans()):
        schema["multipleOf"] = draw(st.sampled_from([0.5, 0.25, 2]))  # exact in binary: jsonschema divides floats
    return schema


@st.composite
def _string(draw) -> dict:
    kind = draw(st.sampled_from(["length", "format", "pattern", "enum", "const"]))
    if kind == "length":
        low = draw(st.integers(0, 6))
        return {"type": "string", "minLength": low, "maxLength": low + draw(st.integers(0, 6))}
    if kind == "format":
        return {"type": "string", "format": draw(st.sampled_from(["date", "time", "date-time", "uuid", "email",
                                                                   "uri"]))}
    if kind == "pattern":
        return {"type": "string", "pattern": draw(st.sampled_from(["^[a-z]{2,5}$", "^\\d{3}-\\d{4}$",
                                                                    "^(yes|no)$", "^[A-Z][a-z]*$"]))}
    if kind == "enum":
        return {"enum": draw(st.lists(st.sampled_from(["red", "green", "blue", 1, 2.5, None, True]), min_size=1,
                                      max_size=4, unique=True))}
    return {"const": draw(st.sampled_from(["fixed", 42, False]))}


leaves = st.one_of(_integer(), _number(), _string(), st.just({"type": "boolean"}))


@st.composite
def _array(draw, items) -> dict:
    low = draw(st.integers(0, 3))
    schema = {"type": "array", "items": draw(items), "minItems": low, "maxItems": low + draw(st.integers(0, 3))}
    if draw(st.booleans()):
        schema["uniqueItems"] = True
    return schema


@st.composite
def _object(draw, values) -> dict:
    if draw(st.integers(0, 3)) == 0:  # a free-form object with a property count
        low = draw(st.integers(0, 2))
        return {"type": "object", "additionalProperties": draw(values), "minProperties": low,
                "maxProperties": low + draw(st.integers(0, 2))}
    names = draw(st.lists(st.sampled_from(["a", "b", "year", "p", "n", "name"]), min_size=1, max_size=3,
                          unique=True))
    props = {name: draw(values) for name in names}
    required = draw(st.lists(st.sampled_from(names), unique=True))
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


schemas = st.one_of(leaves, _array(leaves), _object(st.one_of(leaves, _array(leaves))))


def _near(schema: dict) -> list:
    """Numbers at, just inside and just past each bound."""
    out = []
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            out += [schema[key] + d for d in (-1, -0.5, -0.25, 0, 0.25, 0.5, 1)]
    return out


@st.composite
def values(draw, schema: dict) -> Any:
    """A value shaped like ``schema`` whose leaves may break it."""
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return draw(st.sampled_from([*(schema.get("enum") or [schema.get("const")]), "other", 7]))
    if kind in ("integer", "number"):
        near = [v for v in _near(schema) if kind == "number" or float(v).is_integer()]
        pool = st.sampled_from([int(v) if kind == "integer" else v for v in near]) if near else st.nothing()
        free = st.integers(-5000, 5000) if kind == "integer" else st.integers(-20000, 20000).map(lambda n: n / 4)
        return draw(st.one_of(pool, free))
    if kind == "string":
        return draw(st.one_of(st.text("abcXYZ019-:.@/ ", max_size=14), st.sampled_from(
            ["2024-02-30", "2024-02-29", "12:30:00Z", "1999-01-01T10:00:00+02:00", "a@b.co", "http://x.org/a",
             "123e4567-e89b-12d3-a456-426614174000", "yes", "Abc", "555-1234"])))
    if kind == "boolean":
        return draw(st.sampled_from([True, False, 1]))
    if kind == "array":
        return draw(st.lists(values(schema["items"]), max_size=6))
    if kind == "object":
        props = schema.get("properties")
        if props is None:
            return draw(st.dictionaries(st.sampled_from("abcde"), values(schema["additionalProperties"]), max_size=5))
        # keys in the order the grammar writes them (llama.cpp's converter: the required ones first, then
        # the rest, each in the schema's order): a JSON object's key order carries no meaning, so a
        # grammar holds the model to one order, and a valid value is admitted in that one
        required = set(schema.get("required", []))
        ordered = [k for k in props if k in required] + [k for k in props if k not in required]
        return {k: draw(values(props[k])) for k in ordered if draw(st.integers(0, 4))}
    return None


def grammar_or_none(schema: dict) -> str | None:
    """The schema's compiled grammar, or None when it is refused with a ``GrammarRejected`` (a 400)."""
    try:
        return checked(schema_grammar(schema))
    except GrammarRejected:
        return None


def _fractional_bound(schema: Any) -> bool:
    if isinstance(schema, dict):
        if any(isinstance(schema.get(k), float) and not schema[k].is_integer() for k in
               ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            return True
        return any(_fractional_bound(v) for v in schema.values())
    if isinstance(schema, list):
        return any(_fractional_bound(v) for v in schema)
    return False


def exactly_kept(schema: dict) -> bool:
    """No keyword in ``schema`` is kept only partly, so its grammar must admit nothing invalid."""
    text = json.dumps(schema)
    return not any(f'"{key}"' in text for key in PARTLY) and not _fractional_bound(schema)


def admitted_but_invalid(schema: dict, grammar: str, candidates: list) -> list:
    """The candidates the grammar admits (written as ``json.dumps`` writes them) that the schema refuses."""
    return [v for v in candidates if admits(grammar, json.dumps(v)) and not jsonschema.Draft202012Validator(
        schema).is_valid(v)]


def ask(runtime, schema: dict, max_tokens: int = 48) -> str:
    """One greedy reply under ``schema`` from the real model: how it ended (see the module docstring)."""
    request = ChatRequest(messages=[{"role": "user", "content": f"Reply with JSON matching: {json.dumps(schema)}"}],
                          json_schema=schema, sampling=Sampling(temperature=0, max_tokens=max_tokens))
    try:
        chunks = list(runtime.chat("starter", request))
    except GrammarRejected:
        return "refused"
    except SchemaMismatch:
        return "mismatch"
    text = "".join(c.text for c in chunks if c.kind == "text")
    done = chunks[-1]
    if done.finish_reason == "length":
        return "length"
    value = json.loads(text)  # a reply that ended with stop is JSON ...
    # draft 2020-12's formats: jsonschema.FormatChecker() holds every draft's, and draft 3's "time"
    # (HH:MM:SS, no offset) refused a valid '20:15:34.678-19:30' from the 200-schema bench run
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = [e.message for e in checker.iter_errors(value)]
    assert not errors, f"invalid reply with finish {done.finish_reason}: {text!r} for {schema}: {errors}"  # ... valid
    return "valid"
