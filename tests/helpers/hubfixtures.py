"""Fixtures shared by the hub and download tests: a running fake hub with real GGUF repos, and a
``Hub`` pointed at it with fast retry timings. A test module declares them with
``fakehub = pytest.fixture(run_fakehub)`` and ``settings = pytest.fixture(hub_settings)``."""

from __future__ import annotations

from dataclasses import replace

from fireside.engine.hub.downloads import Downloader
from fireside.engine.hub.hub import Hub
from fireside.engine.settings import Settings
from tests.helpers.fakehub import FakeHub
from tests.helpers.gguf_builder import build_gguf, split_gguf

REPO = "bartowski/SmolLM2-135M-Instruct-GGUF"
Q4 = "SmolLM2-135M-Instruct-Q4_1.gguf"
Q8 = "SmolLM2-135M-Instruct-Q8_0.gguf"
SPLIT = "big/Big-GGUF"


def run_fakehub(tmp_path):
    files = {
        Q4: build_gguf(tmp_path / "src" / Q4, payload_bytes=1536 * 1024, seed=1, template_chars=300_000).read_bytes(),
        Q8: build_gguf(tmp_path / "src" / Q8, payload_bytes=64 * 1024, seed=2).read_bytes(),
        "README.md": b"# SmolLM2\n",
    }
    parts = split_gguf(tmp_path / "split", "Big-Q8_0", count=2, n_layers=4, payload_bytes=128 * 1024)
    with FakeHub() as hub:
        hub.add_repo(REPO, files, downloads=500)
        hub.add_repo(SPLIT, {p.name: p.read_bytes() for p in parts}, downloads=5)
        yield hub


def hub_settings(fireside_home, fakehub):
    s = replace(Settings.from_env(), hf_endpoint=fakehub.url)
    s.ensure_dirs()
    return s


def make_hub(settings, free=1 << 40, token=None, **kw) -> Hub:
    downloader = Downloader(stall_timeout=kw.pop("stall_timeout", 0.5), backoff=0.01,
                            free_space=lambda path: free, **kw)
    hub = Hub(settings, token=token, downloader=downloader)
    downloader.auth = hub.auth
    return hub
