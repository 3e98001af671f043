"""The library tests' shared fixtures: settings on the test's own FIRESIDE_HOME, and a library over them."""

from __future__ import annotations

import pytest

from fireside.engine.library import Library
from fireside.engine.settings import Settings


@pytest.fixture
def settings(fireside_home):
    s = Settings.from_env()
    s.ensure_dirs()
    return s


@pytest.fixture
def library(settings):
    return Library(settings)
