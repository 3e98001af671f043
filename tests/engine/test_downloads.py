"""Downloads against a local fake hub that misbehaves: resume after SIGKILL, stalls, dropped
connections, servers that ignore Range, corrupt bytes, a full disk, cancel and resume."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import time

import pytest

from fireside.engine.errors import DiskFull, IntegrityError, ModelNotFound
from fireside.engine.hub.downloads import DownloadCancelled, Progress
from fireside.engine.library import Library
from tests.helpers.fakehub import Fault
from tests.helpers.hubfixtures import Q4, Q8, REPO, SPLIT, hub_settings, make_hub, run_fakehub

fakehub = pytest.fixture(run_fakehub)
settings = pytest.fixture(hub_settings)

KiB = 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def dest_of(settings, name: str = Q4):
    return settings.models_dir / REPO / name


def test_pull_verifies_and_adds_to_the_library(settings, fakehub):
    updates: list[Progress] = []
    model = make_hub(settings).pull(REPO, "Q4_1", on_progress=updates.append)
    data = fakehub.repos[REPO].files[Q4]
    assert model.path == dest_of(settings) and sha(model.path.read_bytes()) == sha(data)
    assert model.source == "hub" and model.sha256 == sha(data)
    assert model.origin.startswith(f"{REPO}@") and model.aliases == ["smollm2-135m-instruct:q4_1"]
    assert updates[-1].state == "done" and updates[-1].done == updates[-1].total == len(data)
    assert "verifying" in [u.state for u in updates]
    assert not list(settings.models_dir.rglob("*.part*"))


def test_progress_is_sampled_not_sent_per_chunk(settings, fakehub):
    ticks = iter(range(10**6))
    updates: list[Progress] = []
    hub = make_hub(settings, clock=lambda: next(ticks) * 0.02)  # 20 ms between chunks
    hub.pull(REPO, "Q4_1", on_progress=updates.append)
    moving = [u for u in updates if u.state == "downloading"]
    chunks = len(fakehub.repos[REPO].files[Q4]) // (64 * KiB)
    assert 0 < len(moving) < chunks
    assert all(u.speed > 0 and u.eta_s is not None for u in moving)


def wait_for_size(path, size: int, timeout: float = 30) -> None:
    """The client's writes show only on disk, so poll briefly for them."""
    deadline = time.monotonic() + timeout
    while not (path.is_file() and path.stat().st_size >= size) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert path.stat().st_size == size


def test_sigkilled_pull_resumes_from_its_offset(settings, fakehub):
    cut = 512 * KiB
    fault = fakehub.faults[Q4] = Fault(pause_after=cut)
    env = {**os.environ, "HF_ENDPOINT": fakehub.url, "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    cmd = [sys.executable, "-m", "fireside.engine", "pull", f"{REPO}:Q4_1"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert fault.reached.wait(60), "the download never started"
        wait_for_size(dest_of(settings).with_name(Q4 + ".part"), cut)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -9 and not dest_of(settings).exists()
    fakehub.faults.pop(Q4)
    fault.release.set()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert fakehub.downloads(Q4)[-1] == f"bytes={cut}-"
    assert sha(dest_of(settings).read_bytes()) == sha(fakehub.repos[REPO].files[Q4])
    assert "%" in done.stderr and "pulled" in done.stdout
    assert Library(settings).get("smollm2-135m-instruct:q4_1").source == "hub"


def test_flipped_byte_is_caught_and_not_added(settings, fakehub):
    fakehub.faults[Q8] = Fault(flip_byte=1000, times=0)
    with pytest.raises(IntegrityError, match="not added"):
        make_hub(settings).pull(REPO, "Q8_0")
    assert not list(settings.models_dir.rglob("*.gguf*"))
    with pytest.raises(ModelNotFound):
        Library(settings).get("smollm2-135m-instruct:q8_0")


def test_stall_is_retried_and_completes(settings, fakehub):
    fakehub.faults[Q4] = Fault(stall_after=256 * KiB)
    model = make_hub(settings, stall_timeout=0.3).pull(REPO, "Q4_1")
    assert sha(model.path.read_bytes()) == sha(fakehub.repos[REPO].files[Q4])
    assert fakehub.downloads(Q4) == [None, f"bytes={256 * KiB}-"]


def test_dropped_connection_resumes_with_range(settings, fakehub):
    fakehub.faults[Q4] = Fault(drop_after=300 * KiB, times=2)
    model = make_hub(settings).pull(REPO, "Q4_1")
    assert sha(model.path.read_bytes()) == sha(fakehub.repos[REPO].files[Q4])
    assert fakehub.downloads(Q4) == [None, f"bytes={300 * KiB}-", f"bytes={600 * KiB}-"]


def test_server_ignoring_range_rewrites_from_zero(settings, fakehub):
    fakehub.faults[Q4] = Fault(drop_after=300 * KiB, ignore_range=True)
    model = make_hub(settings).pull(REPO, "Q4_1")
    data = fakehub.repos[REPO].files[Q4]
    assert model.path.stat().st_size == len(data) and sha(model.path.read_bytes()) == sha(data)
    assert fakehub.downloads(Q4) == [None, f"bytes={300 * KiB}-"]


def test_not_enough_disk_is_refused_before_any_byte(settings, fakehub):
    size = len(fakehub.repos[REPO].files[Q4])
    with pytest.raises(DiskFull, match="free"):
        make_hub(settings, free=size).pull(REPO, "Q4_1")
    assert not (settings.models_dir / "bartowski").exists()
    assert not fakehub.downloads(Q4), "no byte was requested"


def test_cancel_keeps_the_part_and_a_later_pull_resumes(settings, fakehub):
    cancel = threading.Event()
    fault = fakehub.faults[Q4] = Fault(pause_after=256 * KiB)
    hub = make_hub(settings)
    errors = []

    def pull():
        try:
            hub.pull(REPO, "Q4_1", cancel=cancel)
        except DownloadCancelled as exc:
            errors.append(exc)

    worker = threading.Thread(target=pull)
    worker.start()
    assert fault.reached.wait(10)
    wait_for_size(dest_of(settings).with_name(Q4 + ".part"), 256 * KiB)
    cancel.set()
    fault.release.set()  # the server sends the rest; the client stops at its next chunk
    worker.join(10)
    assert errors and not dest_of(settings).exists()
    part = dest_of(settings).with_name(Q4 + ".part")
    kept = part.stat().st_size
    assert kept == 256 * KiB
    fakehub.faults.pop(Q4)
    model = make_hub(settings).pull(REPO, "Q4_1")
    assert fakehub.downloads(Q4)[-1] == f"bytes={kept}-"
    assert sha(model.path.read_bytes()) == sha(fakehub.repos[REPO].files[Q4])


def test_part_of_another_revision_is_not_resumed(settings, fakehub):
    dest = dest_of(settings)
    dest.parent.mkdir(parents=True)
    dest.with_name(Q4 + ".part").write_bytes(b"x" * 4096)
    dest.with_name(Q4 + ".part.json").write_text('{"sha256": "something else"}')
    model = make_hub(settings).pull(REPO, "Q4_1")
    assert fakehub.downloads(Q4) == [None]
    assert sha(model.path.read_bytes()) == sha(fakehub.repos[REPO].files[Q4])


def test_split_set_downloads_together_and_lists_as_one(settings, fakehub):
    model = make_hub(settings).pull(SPLIT, "Q8_0")
    assert model.id == "big/Big-GGUF/Big-Q8_0" and len(model.files) == 2
    assert model.info.block_count == 4
    for f in model.files:
        assert sha(f.read_bytes()) == sha(fakehub.repos[SPLIT].files[f.name])


def test_cli_pull_ls_rm(settings, fakehub, capsys, monkeypatch):
    from fireside.engine.cli import main

    monkeypatch.setenv("HF_ENDPOINT", fakehub.url)  # the CLI builds its settings from the environment
    assert main(["pull", f"{REPO}/{Q8}"]) == 0
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct:q8_0" in out and "hub" in out
    assert main(["rm", "smollm2-135m-instruct:q8_0"]) == 0
    assert not dest_of(settings, Q8).exists()
    assert main(["rm", "../../etc/passwd"]) == 1
    assert main(["pull", "../../etc:Q4_1"]) == 1
    assert "not a plain name" in capsys.readouterr().err


def test_manager_runs_pulls_at_once_and_pauses_and_resumes(settings, fakehub):
    from fireside.engine.hub.manager import DownloadManager

    fault = fakehub.faults[Q4] = Fault(pause_after=128 * KiB)
    manager = DownloadManager(make_hub(settings))
    slow = manager.start(REPO, "Q4_1")
    fast = manager.start(SPLIT)
    assert fault.reached.wait(10)
    wait_for_size(dest_of(settings).with_name(Q4 + ".part"), 128 * KiB)
    assert fast.finished.wait(30) and fast.state == "done", fast.error  # not blocked by the slow one
    manager.pause(slow.id)
    fault.release.set()
    assert slow.finished.wait(10) and slow.state == "paused"
    kept = dest_of(settings).with_name(Q4 + ".part").stat().st_size
    fakehub.faults.pop(Q4)
    again = manager.resume(slow.id)
    assert again.finished.wait(30) and again.state == "done", again.error
    assert fakehub.downloads(Q4)[-1] == f"bytes={kept}-"
    manager.shutdown()


def test_import_from_the_cli(settings, tmp_path, capsys):
    from fireside.engine.cli import main
    from tests.helpers.gguf_builder import build_gguf

    original = build_gguf(tmp_path / "lms/pub/Repo-GGUF/Thing-Q6_K.gguf")
    assert main(["import", "--from", "lmstudio", "--dir", str(tmp_path / "lms"), "--dry-run"]) == 0
    assert not list(settings.models_dir.rglob("*.gguf"))
    assert main(["import", "--from", "lmstudio", "--dir", str(tmp_path / "lms")]) == 0
    assert "imported pub/Repo-GGUF/Thing-Q6_K" in capsys.readouterr().out
    linked = settings.models_dir / "pub/Repo-GGUF/Thing-Q6_K.gguf"
    assert linked.stat().st_ino == original.stat().st_ino
    assert main(["rm", "thing:q6_k"]) == 0
    assert original.is_file() and "original file stays" in capsys.readouterr().out
