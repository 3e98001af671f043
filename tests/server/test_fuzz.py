"""Property-based fuzzing of every dialect's request models over the real app (issue 17, item 10).

Hypothesis generates bodies for each route (``tests/helpers/apifuzz.py``): plausible values mixed
with arbitrary JSON at every field. Whatever it sends, the server answers 4xx or a valid reply, never
a 500. The run is bounded to about ``BUDGET_S`` seconds: the examples per route are sized from the
time this machine takes per request (60 per route on an idle machine, fewer under load, never under
10); ``fuzz/fuzz_api.py`` runs the same for longer. Every crash a run found is kept in ``fuzz_cases.json`` and replayed here first.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.apifuzz import ROUTES, fuzz_server, is_crash

CASES = json.loads((Path(__file__).parent / "fuzz_cases.json").read_text(encoding="utf-8"))
BUDGET_S = 20.0
MOST, LEAST = 60, 10  # examples per route
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    with fuzz_server(tmp_path_factory.mktemp("fuzz-home")) as server:
        yield server


@pytest.fixture(scope="module")
def bounded(target):
    """Hypothesis settings whose examples, over every route, fit in ``BUDGET_S`` on this machine."""
    body = {"model": "starter", "messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}
    target.send("openai.chat", body)
    started = time.perf_counter()
    for _ in range(5):
        target.send("openai.chat", body)
    per_request = (time.perf_counter() - started) / 5 * 2  # Hypothesis's own generation about doubles it
    examples = int(max(LEAST, min(MOST, BUDGET_S / per_request / (len(ROUTES) + 1))))
    return settings(max_examples=examples, deadline=None, database=None, suppress_health_check=HEALTH)


@pytest.mark.parametrize("case", CASES, ids=[c["why"][:40] for c in CASES])
def test_crashes_found_by_fuzzing_stay_fixed(target, case):
    outcome = target.send(case["route"], None, raw=case["body"].encode("utf-8"))
    assert not is_crash(outcome), outcome.text
    assert outcome.status == case["status"], outcome.text


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_no_generated_request_gets_a_500(target, bounded, route):
    @bounded
    @given(value=ROUTES[route][2])
    def check(value):
        outcome = target.send(route, value)
        assert not is_crash(outcome), f"{route} {json.dumps(value)[:300]} -> {outcome.status} {outcome.text[:300]}"
        assert outcome.status < 500 or outcome.status in (502, 503), outcome.text[:300]

    check()


def test_arbitrary_bytes_are_refused_cleanly(target, bounded):
    @bounded
    @given(raw=st.binary(max_size=64) | st.text(max_size=64).map(lambda t: t.encode("utf-8")),
           route=st.sampled_from(sorted(ROUTES)))
    def check(raw, route):
        outcome = target.send(route, None, raw=raw)
        assert 400 <= outcome.status < 500, outcome.text[:300]

    check()
