"""The RPC tests' shared fixtures: llama.cpp's RPC backend for this install (or a skip), and a device on
loopback that shares and lends memory, made but not yet started."""

from __future__ import annotations

import pytest

from fireside.engine.errors import HardwareError
from fireside.engine.facade import Engine
from fireside.engine.rpc import module
from fireside.engine.runtime import Runtime
from fireside.engine.server.shared import Share, Sharing
from fireside.engine.settings import Settings


@pytest.fixture
def rpc_built() -> str | None:
    """The RPC backend module Fireside built for this install, or None where llama-cpp-python has it built
    in; the test is skipped where neither can be had."""
    try:
        built = module(Settings.from_env().cache_dir)
    except HardwareError as exc:
        pytest.skip(f"llama.cpp's RPC backend is not available: {exc}")
    return str(built) if built else None


@pytest.fixture
def lender(rpc_built):
    """``make(port=0)``: a device named ``desk`` that shares on loopback and lends 1 GiB, not started;
    whatever was made is stopped after the test."""
    settings = Settings.from_env()
    settings.ensure_dirs()
    runtime = Runtime(settings, idle_ttl_s=0)
    made: list[Sharing] = []

    def make(port: int = 0) -> Sharing:
        made.append(Sharing(settings, Share("127.0.0.1", port, "desk", announce=False, lend_gib=1),
                            Engine(settings, runtime)))
        return made[-1]

    yield make
    for shared in made:
        shared.stop()
    runtime.close()
