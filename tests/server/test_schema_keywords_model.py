"""Replies of the real model under random schemas built from the value keywords (issue 27).

Hypothesis draws schemas (tests/helpers/keywordfuzz.py) and each goes to the starter model, greedy,
with a small token budget. A reply either is refused up front (a 400 naming a keyword), cut by the
token limit (finish ``length``), refused after generation (``SchemaMismatch``), or it says ``stop``
and ``jsonschema`` finds it valid: no invalid reply ever says ``stop``. Three schemas keep the
suite fast; ``bench/schema_keywords.py`` runs 200 and prints how each ended.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.helpers.keywordfuzz import ask, schemas

pytestmark = pytest.mark.model
ENDINGS: list[str] = []


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schemas)
def test_no_reply_under_a_random_schema_is_invalid_and_says_stop(runtime, schema):
    ENDINGS.append(ask(runtime, schema, max_tokens=32))
