"""Fixtures for the engine tests: a real runtime with the starter model loaded, one per test module."""

from __future__ import annotations

import pytest

from fireside.engine.models.fitplan import LoadOptions
from fireside.engine.runtime.runtime import Runtime
from fireside.engine.settings import Settings


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """SmolLM2 loaded at a 2,048-token context in a home of its own (modules may define their own)."""
    rt = Runtime(Settings.from_env({"FIRESIDE_HOME": str(tmp_path_factory.mktemp("rt"))}), idle_ttl_s=0)
    rt.load("starter", LoadOptions(context=2048))
    yield rt
    rt.close()
