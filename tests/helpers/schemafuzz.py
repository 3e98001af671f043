"""Property-based fuzzing of the JSON-schema-to-grammar path, shared by the test run and ``bench/``.

Hypothesis draws random schemas (nested arrays, objects, anyOf, enums, patterns, with repetition counts
from 0 to 10**12) and feeds each through ``schema_grammar``; a grammar that comes out must be within
the limits and must go through llama.cpp's parser without crashing. It runs in a child process under
an address-space limit (``RLIMIT_AS``), so an allocation bomb fails the run instead of the machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

ADDRESS_SPACE = 3 * 2**30
PROPERTY = textwrap.dedent('''
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[2]), int(sys.argv[2])))
    import llama_cpp
    from hypothesis import HealthCheck, given, settings, strategies as st
    from fireside.engine.errors import GrammarRejected
    from fireside.engine.runtime.grammar import schema_grammar
    from fireside.engine.runtime.limits import LIMITS, check_grammar_size

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
    seen = {"examples": 0, "accepted": 0, "refused": 0, "llama_refused": 0, "worst_s": 0.0}
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
                seen["accepted"] += 1
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
    done = subprocess.run([sys.executable, "-c", PROPERTY, str(examples), str(address_space)],
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise AssertionError(f"the fuzz child failed (exit {done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
