"""Settings read from the environment: the GPU budget (``FIRESIDE_GPU_BUDGET_GIB``)."""

from __future__ import annotations

import pytest

from fireside.engine.settings import Settings


def test_the_gpu_budget_comes_from_its_environment_variable(tmp_path):
    assert Settings.from_env({"FIRESIDE_HOME": str(tmp_path)}).gpu_budget_gib is None
    assert Settings.from_env({"FIRESIDE_HOME": str(tmp_path), "FIRESIDE_GPU_BUDGET_GIB": "1.5"}).gpu_budget_gib == 1.5


@pytest.mark.parametrize("bad", ["lots", "-1"])
def test_a_bad_gpu_budget_is_refused_by_name(tmp_path, bad):
    with pytest.raises(ValueError, match="FIRESIDE_GPU_BUDGET_GIB"):
        Settings.from_env({"FIRESIDE_HOME": str(tmp_path), "FIRESIDE_GPU_BUDGET_GIB": bad})
