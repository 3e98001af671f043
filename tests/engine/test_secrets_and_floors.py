"""Secrets never show in a repr, a str or a log line; an installed dependency older than its safety
floor is named at start-up, with the fix, instead of failing somewhere deep."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from fireside.engine.deps import FLOORS, check_floors
from fireside.engine.hub.hub import Hub
from fireside.engine.settings import Settings

TOKEN = "hf_SuperSecretToken123"
ROOT = Path(__file__).resolve().parents[2]


def test_settings_never_show_the_token():
    from_env = Settings.from_env({"FIRESIDE_HOME": "/tmp/x", "HF_TOKEN": TOKEN})
    built = replace(from_env, hf_token=TOKEN)  # a plain str, as a caller may set it
    for s in (from_env, built):
        assert TOKEN not in repr(s) and TOKEN not in str(s) and TOKEN not in f"{s!r}"
        assert "hf_token='<redacted>'" in repr(s)
    assert from_env.hf_token == TOKEN, "the value itself is intact for the code that sends it"


def test_the_hub_and_its_auth_never_show_the_token(caplog):
    hub = Hub(Settings.from_env(), token=TOKEN)
    for shown in (repr(hub), str(hub), repr(hub.auth), str(hub.auth), str(vars(hub.auth)), repr(hub.token)):
        assert TOKEN not in shown
    with caplog.at_level(logging.INFO):
        logging.getLogger("fireside.test").info("hub %r auth %r settings %s token %r", hub, hub.auth,
                                                 replace(hub.settings, hf_token=TOKEN), hub.token)
    assert caplog.text and TOKEN not in caplog.text
    assert hub.token == TOKEN


def test_a_package_below_its_floor_is_named_with_the_fix():
    problems = check_floors(lambda name: "0.20.0" if name == "huggingface-hub" else "99.0")
    assert problems == ['huggingface-hub 0.20.0 is installed, but Fireside needs 0.30 or newer (older releases '
                        'lack the hub API Fireside uses for files, sizes and hashes): pip install --upgrade '
                        '"huggingface-hub>=0.30"']
    assert check_floors(lambda name: "99.0") == []
    assert check_floors() == [], "this environment meets every floor"


def test_the_cli_stops_at_start_up_on_an_old_huggingface_hub(tmp_path):
    shadow = tmp_path / "site"  # an older huggingface_hub's metadata, found first on the path
    dist = shadow / "huggingface_hub-0.20.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: huggingface_hub\nVersion: 0.20.0\n")
    env = {**os.environ, "PYTHONPATH": str(shadow)}
    out = subprocess.run([sys.executable, "-m", "fireside.engine", "ls"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 1
    assert "fireside: huggingface-hub 0.20.0 is installed, but Fireside needs 0.30 or newer" in out.stderr
    assert 'pip install --upgrade "huggingface-hub>=0.30"' in out.stderr and "Traceback" not in out.stderr


def test_floors_match_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    for name, (floor, _) in FLOORS.items():
        m = re.search(rf'"{re.escape(name)}>=([\w.]+)"', text, re.IGNORECASE)
        assert m and m.group(1) == floor, name
