"""Every value-constraining JSON-schema keyword is kept by the grammar or refused (issue 27), offline.

Hypothesis draws schemas from the keywords (bounds, multipleOf, lengths, counts, uniqueItems, formats,
const, enum, pattern) and, for each, values near and past its bounds; a grammar whose keywords are all
kept exactly must admit none that ``jsonschema`` refuses, and must admit a valid value where one was
drawn. The stock converter admitted ``3500`` for a year in 1900-2100. Replies from the real model are
tested in tests/server/test_schema_keywords_model.py and, 200 schemas at a time, bench/schema_keywords.py.
"""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fireside.engine.errors import GrammarRejected, SchemaMismatch
from fireside.engine.structured.grammar import checked, schema_grammar
from fireside.engine.structured.replycheck import check_reply
from tests.helpers.gbnf_regex import admits
from tests.helpers.keywordfuzz import admitted_but_invalid, exactly_kept, grammar_or_none, schemas, values


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_grammar_admits_no_value_its_schema_refuses(data):
    schema = data.draw(schemas, label="schema")
    grammar = grammar_or_none(schema)
    if grammar is None:
        return  # refused with a 400 naming why: allowed
    candidates = data.draw(st.lists(values(schema), min_size=8, max_size=16), label="values")
    if exactly_kept(schema):
        assert admitted_but_invalid(schema, grammar, candidates) == []
        valid = [v for v in candidates if jsonschema.Draft202012Validator(schema).is_valid(v)
                 and "e" not in json.dumps(v).replace("true", "").replace("false", "")]
        refused = [v for v in valid if not admits(grammar, json.dumps(v))]
        assert refused == [], grammar  # and every valid value it was shown (no exponent) is admitted


BOUNDED = [
    ({"type": "integer", "minimum": 1900, "maximum": 2100}, [1900, 2024, 2100], [1899, 2101, 3500, -2000]),
    ({"type": "integer", "minimum": 0, "maximum": 9}, [0, 5, 9], [10, 12, 45, 78, -1]),
    ({"type": "integer", "exclusiveMinimum": 100}, [101, 5000], [100, 7, -101]),
    ({"type": "integer", "minimum": -37, "exclusiveMaximum": 12}, [-37, -1, 0, 11], [-38, 12, 120]),
    ({"type": "number", "minimum": 0, "maximum": 1}, [0, 0.5, 1, 1.0, 0.001], [42.5, 1.5, -0.5, 2, 1.01]),
    ({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}, [0.5, 0.25], [0, 1, 0.0, 1.0, -0.5]),
    ({"type": "number", "minimum": -2, "maximum": -1}, [-2, -1.5, -1], [-0.5, -2.5, 0, 1.5]),
    ({"type": "integer", "multipleOf": 5, "minimum": 0, "maximum": 40}, [0, 5, 40], [3, 41, 45]),
    ({"type": "string", "format": "email"}, ["a@b.co"], ["ab.co", "a@b"]),
    ({"type": "string", "format": "uri"}, ["http://x.org/a b".replace(" ", "")], ["no scheme", "x"]),
    ({"type": "array", "minItems": 2, "maxItems": 3}, [[1, 2], [1, 2, 3]], [[1], [1, 2, 3, 4]]),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}, [{"a": 1}], [{}, {"a": 1, "b": 2, "c": 3}]),
    ({"type": ["integer", "null"], "minimum": 3}, [3, None], [2, "x"]),
]


@pytest.mark.parametrize("schema,good,bad", BOUNDED, ids=[json.dumps(c[0]) for c in BOUNDED])
def test_bounds_counts_and_formats_are_in_the_grammar(schema, good, bad):
    grammar = checked(schema_grammar(schema))
    assert all(admits(grammar, json.dumps(v)) for v in good), [v for v in good if not admits(grammar, json.dumps(v))]
    assert not any(admits(grammar, json.dumps(v)) for v in bad), [v for v in bad if admits(grammar, json.dumps(v))]


@pytest.mark.parametrize("schema,said", [
    ({"type": "integer", "not": {"const": 3}}, "#/x/not: the 'not' keyword"),
    ({"type": "array", "contains": {"const": 1}}, "#/x/contains: the 'contains' keyword"),
    ({"type": "object", "patternProperties": {"^a": {"type": "integer"}}}, "#/x/patternProperties: the"),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, "#/x/if: the 'if' keyword"),
    ({"type": "string", "format": "ipv4"}, "#/x/format: the 'ipv4' format"),
    ({"type": "integer", "minimum": 5, "maximum": 3}, "#/x: no integer lies within its bounds"),
    ({"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 1},
     "#/x/minItems: 2 is more than maxItems 1"),
    ({"type": "string", "minLength": 4, "maxLength": 3}, "#/x/minLength: 4 is more than maxLength 3"),
    ({"type": "object", "minProperties": 3, "maxProperties": 1}, "#/x/minProperties: 3 is more than"),
])
def test_a_keyword_no_grammar_keeps_is_refused_naming_it(schema, said):
    with pytest.raises(GrammarRejected) as refused:
        schema_grammar({"type": "object", "properties": {"x": schema}, "required": ["x"]})
    assert said in str(refused.value)


def test_a_pattern_python_cannot_read_is_left_to_the_grammar():
    """fuzz/fuzz_grammar.py found it: ``^[^]x$`` passes llama.cpp's parser (ECMA's ``[^]`` is any
    character) but is an unterminated set to Python's ``re``, and the reply check raised a 500."""
    schema = {"type": "object", "properties": {"c": {"type": "string", "pattern": "^[^]x$"}}, "required": ["c"]}
    checked(schema_grammar(schema))
    check_reply(schema, '{"c": "zx"}')
    with pytest.raises(SchemaMismatch, match="does not match"):
        check_reply({"type": "string", "pattern": "^a+$"}, '"ab"')


@pytest.mark.parametrize("pattern,reply,wrong", [
    ("^[^]{,1}[a-z]$", "xq", "xyz"),              # ECMA's [^] is any character; to re, a class holding "]"
    ("^[^]ab[^\\x20-\\x7E]\\w$", "zab\u00e9k", "zabck"),
])
def test_a_pattern_is_checked_as_ecma_and_the_grammar_read_it(pattern, reply, wrong):
    """The 10-minute server fuzz run: replies the grammar wrote under ``^[^]{,1}[a-z]$`` were refused as
    schema mismatches (500s), Python's ``re`` reading ``[^]...]`` as one class. The grammar admits the
    reply, and the check takes it; a reply outside the pattern is still refused."""
    from tests.helpers.gbnf_regex import admits

    schema = {"type": "string", "pattern": pattern}
    assert admits(checked(schema_grammar(schema)), json.dumps(reply, ensure_ascii=False))
    check_reply(schema, json.dumps(reply, ensure_ascii=False))
    with pytest.raises(SchemaMismatch, match="does not match"):
        check_reply(schema, json.dumps(wrong))
