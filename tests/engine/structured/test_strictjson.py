"""The grammars Fireside builds admit only JSON a strict parser accepts: no raw control character,
quote or backslash inside a string, whether it comes from a plain string, an enum, a property name or
a pattern. Each case also checks the stock converter, so the test shows the hole it closes."""

from __future__ import annotations

import json

import pytest
from llama_cpp.llama_grammar import json_schema_to_gbnf

from fireside.engine.errors import GrammarRejected
from fireside.engine.structured.grammar import checked, schema_grammar
from tests.helpers.gbnf_regex import admits

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

# (schema, text the grammar must refuse, the strict JSON of the same value it must admit)
CASES = [
    (CITY, '{"city": "Par\nis"}', '{"city": "Par\\nis"}'),
    (CITY, '{"city": "a\tb\x7f"}', '{"city": "a\\tb\\u007f"}'),
    ({"enum": ["a\nb"]}, '"a\nb"', '"a\\nb"'),
    ({"type": "object", "properties": {"k\\ey": {"const": 1}}, "required": ["k\\ey"]}, '{"k\\ey": 1}',
     '{"k\\\\ey": 1}'),
    ({"type": "string", "pattern": "^a.c$"}, '"a\x01c"', '"abc"'),
    ({"type": "string", "pattern": "^a.c$"}, '"a"c"', '"abc"'),
    ({"type": "string", "pattern": "^[ -~]+$"}, '"say "hi""', '"say hi"'),
    ({"type": "string", "pattern": '^q"$'}, '"q""', '"q\\""'),
    ({"type": "string", "pattern": "^[^x]$"}, '"\n"', '"y"'),
]


@pytest.mark.parametrize("schema,bad,good", CASES)
def test_strings_in_every_grammar_hold_only_what_json_loads_accepts(schema, bad, good):
    grammar = checked(schema_grammar(schema))
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)  # strict, as pydantic is: the grammar must not let the model write this
    assert not admits(grammar, bad), grammar
    assert admits(grammar, good), grammar
    assert json.loads(good) is not None


def test_the_stock_converter_has_the_holes_these_cases_close():
    stock = [admits(json_schema_to_gbnf(json.dumps(s)), bad) for s, bad, _ in CASES[:5]]
    assert all(stock), stock  # raw control characters, an unescaped literal, a pattern's dot


def test_a_pattern_class_that_matches_only_escapable_characters_is_refused():
    with pytest.raises(GrammarRejected, match="matches no character a JSON string may hold"):
        schema_grammar({"type": "string", "pattern": '^["]$'})


@pytest.mark.parametrize("pattern,good,bad", [
    (r"^\d+$", '"123"', '"12a"'),
    (r"^a\sb$", '"a\\tb"', '"a\tb"'),
    (r"^\w\W$", '"a-"', '"a\n"'),
])
def test_regex_class_escapes_in_a_pattern_become_json_safe_classes(pattern, good, bad):
    """The converter copies \\d, \\w and \\s as GBNF escapes that GBNF lacks (so llama.cpp refused
    every schema with the commonest pattern, ``^\\d+$``); they become classes, JSON-escaped."""
    grammar = checked(schema_grammar({"type": "string", "pattern": pattern}))
    assert admits(grammar, good) and not admits(grammar, bad), grammar


@pytest.mark.parametrize("pattern,good,bad", [
    (r"^\d{3}-\d{4}$", "555-1234", "555-123"),  # was ("-" [0-9]){4}: refused every phone number
    (r"^\w+@\w+$", "ab@cd", "ab@"),             # was "@\w" repeated
    (r"^\d+\.\d+$", "1.25", "1x2"),             # \. was an escape GBNF lacks: refused
    (r"^[\d.-]+$", "1.2-3", "a"),
])
def test_an_escape_in_a_pattern_is_one_unit_as_re_reads_it(pattern, good, bad):
    """The converter merged an escape into the literal before it, so a quantifier after it repeated
    both; the CI run of 2026-12-02 found ``^\\d{3}-\\d{4}$`` refusing ``555-1234``."""
    grammar = checked(schema_grammar({"type": "string", "pattern": pattern}))
    assert admits(grammar, json.dumps(good)) and not admits(grammar, json.dumps(bad)), grammar


def test_a_pattern_grammar_admits_exactly_what_re_matches():
    """Differential, against Python's ``re``: random patterns built from escapes, classes, literals,
    groups and quantifiers; over strings of characters a JSON string holds as they are, the grammar
    admits a string exactly when ``re.fullmatch`` matches it. A pattern refused with a 400 is allowed.
    (Each grammar is checked by llama.cpp in a child process, about 0.1 s: 80 patterns a run.)"""
    import re

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    units = st.sampled_from([r"\d", r"\w", r"\s", r"\D", r"\W", r"\.", r"\-", "a", "b", "-", ".", "[ab]",
                             r"[\d.]", r"[^\s]", r"[^a\d]", "1", " ", "@"])
    quantifiers = st.sampled_from(["", "", "", "?", "*", "+", "{2}", "{1,2}", "{,2}"])
    piece = st.tuples(units, quantifiers).map("".join)
    group = st.lists(piece, min_size=1, max_size=3).map(lambda p: f"({''.join(p)})")
    body = st.lists(st.one_of(piece, st.tuples(group, quantifiers).map("".join)), min_size=1, max_size=5)
    texts = st.lists(st.text(alphabet="ab1-. @_x", max_size=7), min_size=4, max_size=12)

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(body.map("".join), texts)
    def agree(body, candidates):
        try:
            grammar = checked(schema_grammar({"type": "string", "pattern": f"^{body}$"}))
        except GrammarRejected:
            return
        wrong = [t for t in candidates if admits(grammar, json.dumps(t)) != bool(re.fullmatch(body, t))]
        assert wrong == [], (body, grammar)

    agree()
