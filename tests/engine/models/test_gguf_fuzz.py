"""Property-based fuzzing of the GGUF reader in the normal test run, under an address-space cap.

The property and its strategies live in ``tests/helpers/gguf_fuzz.py``; it runs here in a child
process whose address space is capped (``limit_memory``), so an allocation bomb is a failed test and
not a machine out of memory. The inputs are derandomized, so every run tries the same ones; the
longer, randomized search is ``fuzz/fuzz_gguf.py``. Every crash either finds is saved under
``tests/engine/regressions/gguf/``, and every file there is replayed here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.gguf_fuzz import REGRESSIONS, TIME_BOUND_S

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = 150  # of each kind (built headers, mutated files): about 10 s on a loaded two-core machine


def harness(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tests.helpers.gguf_fuzz", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def test_fuzzed_headers_give_a_model_or_invalid_model_file_and_nothing_else():
    out = harness("--examples", str(EXAMPLES), "--derandomize", "--save", str(REGRESSIONS))
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads(out.stdout)
    assert report["inputs"] >= 2 * EXAMPLES
    assert report["crashes"] == 0, json.dumps(report["distinct"], indent=1)
    assert report["slowest_s"] < TIME_BOUND_S
    if sys.platform == "linux":
        assert report["memory_cap"] > 0


def test_every_saved_crash_replays_cleanly():
    files = sorted(REGRESSIONS.glob("*.gguf"))
    assert len(files) >= 10
    out = harness("--replay", str(REGRESSIONS))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["failures"] == []


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_the_cap_turns_an_allocation_bomb_into_an_error():
    code = "from tests.helpers.gguf_fuzz import limit_memory; limit_memory(); bytearray(3 << 30)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0 and "MemoryError" in out.stderr
