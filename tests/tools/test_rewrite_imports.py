"""``tools/rewrite_imports.py`` rewrites what other branches wrote against the old layout once they are merged on
top of the runtime/ split: relative imports written at a moved file's old place, imports of moved modules (from
a wing's face when the caller is outside the wing), dotted names in strings and source paths in comments; and a
second run changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import rewrite_imports as rw


@pytest.fixture(scope="module")
def rewriter():
    return rw.Rewriter()


def _twice(rewriter, name: str, path: str, text: str) -> str:
    once = rw.rewrite_text(rewriter.rewrite_imports(name, Path(path), text))
    assert rw.rewrite_text(rewriter.rewrite_imports(name, Path(path), once)) == once
    return once


def test_a_moved_file_s_imports_written_at_its_old_place(rewriter):
    text = "from ..kvcache import CacheConfig\nfrom ...types import Usage\nfrom .decode import Reply\n"
    assert _twice(rewriter, "fireside.engine.runner.batch", "engine/runner/batch.py", text) == (
        "from .kvcache import CacheConfig\nfrom ..types import Usage\nfrom .decode import Reply\n")


def test_an_old_import_from_outside_comes_from_the_face(rewriter):
    text = ("from ..runtime.templates import TEMPLATE_NAMES\nfrom ..runtime import kvcache, Runtime\n"
            "def f():\n    from ..runtime.grammar import (\n        checked,\n        grammar_for,\n    )\n")
    assert _twice(rewriter, "fireside.engine.server.openai", "engine/server/openai.py", text) == (
        "from ..prompts import TEMPLATE_NAMES\nfrom ..runner import kvcache\nfrom ..runtime import Runtime\n"
        "def f():\n    from ..structured import (\n        checked,\n        grammar_for,\n    )\n")


def test_dotted_names_and_paths_in_text(rewriter):
    text = 'patch("fireside.engine.runtime.runner.batch.Gather")  # runtime/runner/batch.py, bench/fuzz_gguf.py\n'
    assert _twice(rewriter, "tests.x", "tests/x.py", text) == (
        'patch("fireside.engine.runner.batch.Gather")  # runner/batch.py, fuzz/fuzz_gguf.py\n')


def test_the_tree_has_nothing_left_to_rewrite():
    assert rw.main(["--check"]) == 0
