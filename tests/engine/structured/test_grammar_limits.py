"""The JSON-schema-to-grammar path: limits checked before conversion, llama.cpp's verdict from a separate
process, and a Hypothesis property over random schemas run under an address-space limit."""

from __future__ import annotations

import json
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from fireside.engine.errors import GrammarRejected
from fireside.engine.structured import grammarcheck
from fireside.engine.structured.grammar import checked, schema_grammar
from fireside.engine.structured.limits import LIMITS, PatternReader
from tests.helpers import schemafuzz

REGRESSIONS = Path(__file__).parents[1] / "regressions" / "schemas"

ARRAY = {"type": "array", "items": {"type": "integer"}}


def _refused(schema, *limits: str) -> GrammarRejected:
    with pytest.raises(GrammarRejected) as refused:
        checked(schema_grammar(schema))
    assert refused.value.limit in limits, str(refused.value)
    return refused.value


@pytest.mark.parametrize("count", [10**7, 10**12])
def test_a_huge_repetition_count_is_refused_before_any_grammar_is_built(count):
    tracemalloc.start()
    started = time.perf_counter()
    try:
        error = _refused({**ARRAY, "maxItems": count}, "repeat")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "maxItems" in str(error) and str(LIMITS.repeat) in str(error)
    assert time.perf_counter() - started < 1.0
    assert peak < 2**20, f"{peak / 2**20:.1f} MiB allocated to refuse it"


def test_an_enum_of_100000_values_is_refused_fast():
    started = time.perf_counter()
    error = _refused({"enum": list(range(100_000))}, "alternatives")
    assert "enum" in str(error) and time.perf_counter() - started < 1.0


def test_the_maxitems_that_crashed_the_runner_is_refused_by_name():
    assert "#/maxItems is 3000" in str(_refused({**ARRAY, "maxItems": 3000}, "repeat"))


def test_a_ref_chain_that_fans_out_is_counted_where_it_is_used():
    defs = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 16} for i in range(5)}  # 16**5 paths
    defs["d5"] = {"type": "integer"}
    _refused({"$defs": defs, "$ref": "#/$defs/d0"}, "nodes", "alternatives_total")


def test_a_definition_used_in_several_places_is_still_allowed():
    address = {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
    schema = {"$defs": {"address": address}, "type": "object",
              "properties": {k: {"$ref": "#/$defs/address"} for k in ("home", "work", "billing")}}
    assert "::=" in checked(schema_grammar(schema))


@pytest.mark.parametrize(("pattern", "limit"), [("^((a{400}){400}){400}$", "pattern_expansion"),
                                                ("^a{0,100000}$", "repeat")])
def test_pattern_quantifiers_are_multiplied_out_before_conversion(pattern, limit):
    _refused({"type": "string", "pattern": pattern}, limit)


def test_deep_nesting_is_refused_by_name():
    schema = {"type": "integer"}
    for _ in range(LIMITS.depth + 1):
        schema = {"type": "array", "items": schema}
    _refused(schema, "depth")


def test_a_grammar_llama_cpp_refuses_is_a_clear_error_and_the_verdict_is_cached():
    bad = 'root ::= "a" ('
    with pytest.raises(GrammarRejected, match="expecting"):
        checked(bad)
    started = time.perf_counter()
    with pytest.raises(GrammarRejected, match="expecting"):
        checked(bad)
    assert time.perf_counter() - started < 0.05


def test_llama_cpps_own_repetition_refusal_comes_back_as_a_rejection_not_a_crash():
    # Inside the limits, but past llama.cpp's threshold: each item is a group of three rules.
    items = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
    schema = {"type": "array", "items": {"anyOf": [items, {"type": "string", "maxLength": 400}]}, "maxItems": 500}
    try:
        assert checked(schema_grammar(schema))
    except GrammarRejected as refused:
        assert refused.limit in ("llama.cpp", "grammar_bytes", "grammar_rules")


def test_a_crashing_checker_is_reported_not_propagated(monkeypatch):
    monkeypatch.setattr(grammarcheck, "checker_command",
                        lambda: [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"])
    with pytest.raises(GrammarRejected, match="crashed"):
        checked('root ::= "crash-me-' + str(time.time()) + '"')


# --- the property: any schema gives a grammar under the limits or a clear refusal, in bounded time --------
def test_random_schemas_give_a_bounded_grammar_or_a_clear_refusal():
    """Hypothesis drives the schema-to-grammar path in a child under a 3 GiB address-space limit."""
    started = time.perf_counter()
    figures = schemafuzz.run(examples=200, timeout_s=120)
    assert figures["examples"] >= 150 and figures["accepted"] and figures["refused"]
    assert time.perf_counter() - started < 60


ENFORCEABLE_NOW = {"const-control-char-null-sampler"}  # strictjson.py escapes the literal llama.cpp refused


@pytest.mark.parametrize("path", sorted(p for p in REGRESSIONS.glob("*.json") if p.stem not in ENFORCEABLE_NOW),
                         ids=lambda p: p.stem)
def test_kept_reproducers_are_refused(path):
    """Every schema that once crashed or stalled a runner, kept as a file."""
    with pytest.raises(GrammarRejected):
        checked(schema_grammar(json.loads(path.read_text())))


def test_a_const_with_a_control_character_compiles_as_its_json_escape():
    """It once reached llama.cpp as an unknown escape (``\\b`` unescaped); now it is the JSON text."""
    grammar = checked(schema_grammar(json.loads((REGRESSIONS / "const-control-char-null-sampler.json").read_text())))
    assert r'cb ::= "\"\\u00ca\\u00d0\\b\""' in grammar, grammar  # JSON's escapes, written out


# --- patterns: one reading for the caps and the converter (issue 25) -------------------------------------
DEAD_END_SCHEMA = {"type": "object", "properties": {"c": {"type": "string", "pattern": "^[^ -\\U0010FFFF]$"}},
                   "required": ["c"]}  # the audit's 150 bytes: SIGABRT in the shared runner


@pytest.mark.parametrize("pattern", ["^[^ -\\U0010FFFF]$", "^[^\\x00-\\U0010FFFF]$", "^a[]$", "^[z-a]$",
                                     '^[\\"\\\\]$', "^x(y[^ -\\U0010FFFF])?$"])
def test_a_class_that_matches_nothing_is_refused_naming_its_place(pattern):
    schema = {**DEAD_END_SCHEMA, "properties": {"c": {"type": "string", "pattern": pattern}}}
    error = _refused(schema, "empty_class")
    assert "#/properties/c/pattern" in str(error), str(error)


@pytest.mark.parametrize("pattern", ["^a{6_00}$", "^a{ 600}$", "^a{600 }$", "^(a{1_000}){1_000}$", "^a{+600}$",
                                     "^a{-1}$", "^a{\u0666\u0660\u0660}$", "^a{5,2}$", "^a{1,2,3}$", "^a{}$"])
def test_every_quantifier_spelling_the_cap_cannot_read_is_refused(pattern):
    error = _refused({"type": "string", "pattern": pattern}, "pattern_syntax")
    assert "#/pattern" in str(error)


@pytest.mark.parametrize("pattern", ["^a]$", "^}$", "^(a)]$"])
def test_a_stray_closing_bracket_is_refused_not_looped_on(pattern):
    """llama-cpp-python's converter takes nothing at a lone ``]`` or ``}`` and loops forever (a thread of
    the server at 100% CPU for good); the reader refuses it first."""
    started = time.perf_counter()
    _refused({"type": "string", "pattern": pattern}, "pattern_syntax")
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(("pattern", "counts"), [("^a{3}b{,4}c{2,}$", [(3, 3), (0, 4), (2, None)]),
                                                  ("^(ab{2}){3}[{]{4}\\{5\\}$", [(2, 2), (3, 3), (4, 4)]),
                                                  ("^\\d{3}-[^x]{2}$", [(3, 3), (2, 2)])])
def test_well_formed_quantifiers_still_convert(pattern, counts):
    reader = PatternReader(pattern, "#/pattern", LIMITS)
    reader.read()
    assert reader.quantifiers == counts
    assert "::=" in checked(schema_grammar({"type": "string", "pattern": pattern}))


def test_the_cap_reads_every_quantifier_the_converter_expands(monkeypatch):
    """Differential: random patterns over the characters that matter; whenever the reader accepts one,
    the converter calls ``_build_repetition`` with exactly the (min, max) pairs the reader capped."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from llama_cpp import llama_grammar

    from fireside.engine.structured.strictjson import StrictConverter

    built: list = []
    original = llama_grammar._build_repetition

    def record(item, low, high, *args, **kwargs):
        built.append((low, high))
        return original(item, low, high, *args, **kwargs)

    monkeypatch.setattr(llama_grammar, "_build_repetition", record)
    alphabet = st.sampled_from(list("ab.|()[]{}^-,*+?\\\" 0123_") + ["{2}", "{1,3}", "{2,}", "{,2}", "\\{", "\\]"])

    @settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(alphabet, max_size=14).map("".join))
    def agree(body):
        pattern = f"^{body}$"
        reader = PatternReader(pattern, "#/pattern", LIMITS)
        try:
            reader.read()
        except GrammarRejected:
            return
        built.clear()
        converter = StrictConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
        try:
            converter._visit_pattern(pattern, "root")
        except (AssertionError, ValueError, IndexError, GrammarRejected):
            return  # the converter refuses it: a 400 either way
        assert built == reader.quantifiers, pattern

    agree()


# --- the child's walk: a grammar that can get stuck never reaches a runner --------------------------------
@pytest.mark.parametrize("grammar", ['root ::= "a" [^\\x00-\\U0010FFFF]',
                                     'root ::= x\nx ::= "a" []',
                                     'root ::= ("a" [^\\x00-\\U0010FFFF])* "b"',
                                     'root ::= "{" item "}"\nitem ::= "x" item  # no way out'],
                         ids=["empty-negated-class", "empty-class", "stuck-inside-a-star", "endless-recursion"])
def test_a_grammar_llama_cpp_compiles_but_that_can_get_stuck_is_refused(grammar):
    with pytest.raises(GrammarRejected, match="can get stuck") as refused:
        checked(grammar)
    assert refused.value.limit == "llama.cpp"


def test_the_walk_passes_deep_and_recursive_grammars_that_can_complete():
    nested = schema_grammar({"type": "array", "items": {"type": "integer"}, "maxItems": LIMITS.repeat})  # 500 groups deep
    assert checked(nested) == nested
    tree = 'root ::= node\nnode ::= "(" (node ("," node)*)? ")" | [a-z]+'
    assert checked(tree) == tree


@pytest.mark.parametrize("pattern", ["^([{}]*){,500}$", "^(a*)*$", "^(a?)+$", "^(x|){2,40}$", "^(a+)+$", "^([0-9]{2,3})*$"])
def test_a_repetition_of_what_can_match_nothing_or_of_a_repetition_is_refused(pattern):
    """fuzz/fuzz_grammar.py's 10-minute server run: ``{"type": "array", "items": {"type": "string", "pattern":
    "^([{}]*){,500}$"}, "minItems": 2, "maxItems": 10}`` passed every limit, and llama.cpp's grammar, keeping
    a parse for every way to split the reply among 500 copies that can each match nothing, took 393 s
    for one request while another client's stream on the runner stalled 53 s."""
    refused = _refused({"type": "array", "items": {"type": "string", "pattern": pattern}}, "nested_repetition")
    assert "#/items/pattern repeats" in str(refused)


@pytest.mark.parametrize("pattern", [r"^(\d+\.)*\d+$", r"^([a-z0-9-]+\.)+[a-z]{2,}$", "^([0-9]{3})+$", "^(a|b)+$",
                                     "^((a)?b)+$", r"^(\s*x)+$"])
def test_repetitions_that_split_a_text_one_way_still_convert(pattern):
    assert "::=" in checked(schema_grammar({"type": "string", "pattern": pattern}))
