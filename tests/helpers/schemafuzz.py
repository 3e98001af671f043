"""Property-based fuzzing of the JSON-schema-to-grammar path, shared by the test run and ``bench/``.

Hypothesis draws random schemas (nested arrays, objects, anyOf, enums, patterns, with repetition counts
from 0 to 10**12) and feeds each through ``schema_grammar``; a grammar that comes out must be within
the limits, must go through llama.cpp's parser without crashing, and is walked by the grammar check's
``dead_end``. It runs in a child process under an address-space limit (``RLIMIT_AS``), so an
allocation bomb fails the run instead of the machine.

``random_schema`` (also drawn by the property, through a Hypothesis-driven ``Random``) builds hostile
patterns: negated classes that cover everything or nearly, empty and reversed classes, nested
repetitions, every spelling of a quantifier (``{6_00}``, ``{ 6}``, ``{+3}``, ``{5,2}``, other scripts'
digits), stray ``]`` and ``}``; ``fuzz/fuzz_grammar.py`` sends the same schemas to a real server.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from pathlib import Path

ADDRESS_SPACE = 3 * 2**30
ROOT = Path(__file__).resolve().parents[2]  # the checkout, so the child imports tests.helpers
PROPERTY = textwrap.dedent('''
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
    sys.path.insert(0, sys.argv[3])
    sys.setrecursionlimit(20_000)  # as the grammar check's child: the walk follows groups as deep as they nest
    import llama_cpp
    from hypothesis import HealthCheck, given, settings, strategies as st
    from fireside.engine.errors import GrammarRejected
    from fireside.engine.structured.grammar import schema_grammar
    from fireside.engine.structured.grammarcheck import dead_end
    from fireside.engine.structured.limits import LIMITS, check_grammar_size
    from tests.helpers.schemafuzz import random_schema

    counts = st.one_of(st.integers(0, 5), st.integers(0, 10**12), st.sampled_from([499, 500, 501, 1000, 3000]))
    leaf = st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["integer", "number", "string", "boolean", "null"])}),
        st.fixed_dictionaries({"type": st.just("string")}, optional={"minLength": counts, "maxLength": counts,
            "pattern": st.from_regex(r"\\^[ab]([{][0-9]{1,4}[}])?\\$", fullmatch=True)}),
        st.fixed_dictionaries({"enum": st.lists(st.integers() | st.text(max_size=5), min_size=1, max_size=400)}),
        st.fixed_dictionaries({"const": st.text(max_size=20)}))
    schemas = st.recursive(leaf, lambda inner: st.one_of(
        st.fixed_dictionaries({"type": st.just("array"), "items": inner}, optional={"minItems": counts,
                                                                                     "maxItems": counts}),
        st.fixed_dictionaries({"type": st.just("object"),
                               "properties": st.dictionaries(st.text("abc", min_size=1, max_size=3), inner,
                                                             max_size=6)}),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=4)})), max_leaves=25)
    schemas = st.one_of(schemas, st.randoms(use_true_random=False).map(random_schema))
    seen = {"examples": 0, "accepted": 0, "refused": 0, "llama_refused": 0, "walk_refused": 0, "worst_s": 0.0}
    began = time.perf_counter()

    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(schemas)
    def prop(schema):
        started = time.perf_counter()
        try:
            grammar = schema_grammar(schema)
        except GrammarRejected as refused:
            assert refused.limit and ("limit" in str(refused) or "cannot be enforced" in str(refused)), refused
            seen["refused"] += 1
        else:
            check_grammar_size(grammar)
            sampler = llama_cpp.llama_sampler_init_grammar(None, grammar.encode(), b"root")  # must not crash
            if sampler:
                llama_cpp.llama_sampler_free(sampler)
                stuck = dead_end(grammar)
                seen["walk_refused" if stuck else "accepted"] += 1
            else:  # within the limits but refused by llama.cpp: ``verify`` turns this into a 400
                seen["llama_refused"] += 1
        took = time.perf_counter() - started
        seen["worst_s"] = max(seen["worst_s"], took)
        seen["examples"] += 1
        assert took < 5.0, f"{took:.1f} s on {json.dumps(schema)[:300]}"

    prop()
    seen["total_s"] = time.perf_counter() - began
    print(json.dumps(seen))
''')


def run(examples: int, timeout_s: float, address_space: int = ADDRESS_SPACE) -> dict:
    """Run the property for ``examples`` schemas; the child's figures, or AssertionError with its output."""
    done = subprocess.run([sys.executable, "-c", PROPERTY, str(examples), str(address_space), str(ROOT)],
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise AssertionError(f"the fuzz child failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- hostile patterns --------------------------------------------------------------------------------------
_CLASSES = ["[a-z]", "[^a]", "[0-9A-F]", "[^ -\\U0010FFFF]", "[^\\x00-\\U0010FFFF]", "[^\\x20-\\x7E]",
            "[^\\x00-\\uFFFF]", "[]", "[^]", "[z-a]", '["\\\\]', "[^\\x21-\\U0010FFFF]", "[\\x00-\\x1F]",
            "[\\]]", "[{}]", "[^\\d]"]
_COUNTS = ["0", "1", "2", "3", "5", "10", "100", "499", "500", "501", "1000", "10000000"]
_ODD_COUNTS = ["6_00", " 600", "600 ", "+3", "-1", "5,2", "\u0663", "", "1,2,3", "1_0,2", " 2 , 3 ", "0x10"]
_LITERALS = ["a", "b", "ab", "-", " ", "_", "\\d", "\\w", "\\s", "\\.", "\\{", "\\}", "\\]", '"', "\\\\",
             "\u00e9", "\U0001F600", "]", "}", "\\q", "\\x41", "\\u0041"]


def _quantifier(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(["*", "+", "?"])
    if roll < 0.85:
        low, high = rng.choice(_COUNTS), rng.choice(_COUNTS + [""])
        return rng.choice([f"{{{low}}}", f"{{{low},{high}}}", f"{{,{high or '3'}}}"])
    return f"{{{rng.choice(_ODD_COUNTS)}}}"


def random_pattern(rng: random.Random, depth: int = 0) -> str:
    """A regex body (no anchors) built from classes, literals, groups, alternation and quantifiers."""
    parts = []
    for _ in range(rng.randint(1, 4)):
        roll = rng.random()
        if roll < 0.3:
            part = rng.choice(_CLASSES)
        elif roll < 0.45 and depth < 4:
            inner = [random_pattern(rng, depth + 1) for _ in range(rng.randint(1, 3))]
            part = "(" + "|".join(inner) + ")"
        elif roll < 0.5:
            part = "."
        else:
            part = rng.choice(_LITERALS)
        if rng.random() < 0.5:
            part += _quantifier(rng)
            if rng.random() < 0.15:
                part = f"({part}){_quantifier(rng)}"  # a repetition of a repetition
        parts.append(part)
    return "".join(parts)


def random_schema(rng: random.Random) -> dict:
    """A schema whose strings carry hostile patterns, at the top, in an object, an array or an anyOf."""
    def string() -> dict:
        body = random_pattern(rng)
        return {"type": "string", "pattern": body if rng.random() < 0.05 else f"^{body}$"}

    roll = rng.random()
    if roll < 0.25:
        return string()
    if roll < 0.6:
        names = ["a", "b", "c"][:rng.randint(1, 3)]
        return {"type": "object", "properties": {n: string() for n in names}, "required": names[:rng.randint(0, len(names))]}
    if roll < 0.85:
        return {"type": "array", "items": string(), "minItems": rng.choice([0, 1, 2]), "maxItems": rng.choice([1, 3, 10])}
    return {"anyOf": [string() for _ in range(rng.randint(1, 3))]}
