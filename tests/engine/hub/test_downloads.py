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

from fireside.engine.errors import DiskFull, DownloadError, IntegrityError, ModelNotFound
from fireside.engine.fmt import human_bytes
from fireside.engine.hub.downloads import DownloadCancelled, Progress
from fireside.engine.library import Library
from fireside.engine.models import hardware
from fireside.engine.models.hardware import Hardware
from tests.helpers.fakehub import Fault
from tests.helpers.gguf_builder import build_gguf
from tests.helpers.hubfixtures import Q4, Q8, REPO, SPLIT, hub_settings, make_hub, run_fakehub
from tests.helpers.waiting import wait_until

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
    wait_until(lambda: path.is_file() and path.stat().st_size >= size, timeout)
    assert path.stat().st_size == size


def blocked_reading(thread: threading.Thread) -> bool:
    """Whether ``thread`` waits in a socket read: its innermost Python frame is httpcore's ``read``."""
    frame = sys._current_frames().get(thread.ident)
    return frame is not None and frame.f_code.co_name == "read" and "httpcore" in frame.f_code.co_filename


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


# --- Two pulls of one file, cancel during a stall, speed after a resume, the hub's 404 ----------------

def test_two_threads_pulling_one_file_share_one_download(settings, fakehub):
    fault = fakehub.faults[Q4] = Fault(pause_after=256 * KiB)
    first_hub, second_hub = make_hub(settings), make_hub(settings)
    results, errors, waits = [], [], []

    def pull(hub, on_progress=None):
        try:
            results.append(hub.pull(REPO, "Q4_1", on_progress=on_progress))
        except Exception as exc:  # noqa: BLE001 - the race showed as a bare FileNotFoundError
            errors.append(exc)

    first = threading.Thread(target=pull, args=(first_hub,))
    first.start()
    assert fault.reached.wait(10)
    second = threading.Thread(target=pull, args=(second_hub, waits.append))
    second.start()
    try:
        wait_until(lambda: errors or any(p.state == "waiting" for p in waits), 10)
    finally:
        fault.release.set()  # the threads end either way
    first.join(30)
    second.join(30)
    assert not errors, errors
    assert any(p.state == "waiting" for p in waits), "the second pull said it was waiting for the first"
    assert [m.path for m in results] == [dest_of(settings)] * 2
    assert sha(dest_of(settings).read_bytes()) == sha(fakehub.repos[REPO].files[Q4])
    assert fakehub.downloads(Q4) == [None, f"bytes={256 * KiB}-"], "only the first pull downloaded (and resumed)"
    assert not list(settings.models_dir.rglob("*.part*"))


def test_two_pull_processes_share_one_download(settings, fakehub):
    fault = fakehub.faults[Q4] = Fault(pause_after=256 * KiB)
    env = {**os.environ, "HF_ENDPOINT": fakehub.url, "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
    cmd = [sys.executable, "-m", "fireside.engine", "pull", f"{REPO}:Q4_1"]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    try:
        assert fault.reached.wait(60), "the first download never started"
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        said: list[str] = []  # the second process's stderr, a line at a time as it says it
        reader = threading.Thread(target=lambda: said.extend(procs[1].stderr), daemon=True)
        reader.start()
        # the second process has asked the hub, then reached the lock and said so
        wait_until(lambda: any("another pull of this file is running" in line for line in said), 60)
        fault.release.set()
        outs = [procs[0].communicate(timeout=120), (procs[1].stdout.read(), "")]
        procs[1].wait(timeout=120)
        reader.join(10)
        outs[1] = (outs[1][0], "".join(said))
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert all("pulled" in out for out, _ in outs)
    assert "another pull of this file is running; waiting for it" in outs[1][1]
    assert fakehub.downloads(Q4) == [None, f"bytes={256 * KiB}-"], "only the first pull downloaded"
    assert sha(dest_of(settings).read_bytes()) == sha(fakehub.repos[REPO].files[Q4])


def test_cancel_during_a_stall_returns_within_a_second_or_two(settings, fakehub):
    fakehub.faults[Q4] = Fault(stall_after=256 * KiB)  # then silence, for 30 s
    cancel, errors = threading.Event(), []
    hub = make_hub(settings, stall_timeout=30.0)  # the real stall timeout

    def pull():
        try:
            hub.pull(REPO, "Q4_1", cancel=cancel)
        except DownloadCancelled as exc:
            errors.append(exc)

    worker = threading.Thread(target=pull, daemon=True)
    worker.start()
    wait_for_size(dest_of(settings).with_name(Q4 + ".part"), 256 * KiB)
    wait_until(lambda: blocked_reading(worker), 10)  # on a server that sends nothing
    t0 = time.monotonic()
    cancel.set()
    worker.join(5)
    took = time.monotonic() - t0
    assert not worker.is_alive() and errors, "cancel was not honoured within 5 s (stall timeout 30 s)"
    assert took < 2.0
    assert dest_of(settings).with_name(Q4 + ".part").stat().st_size == 256 * KiB, "the part is kept"


def test_speed_after_a_resume_counts_only_this_sessions_bytes(settings, fakehub):
    kept = 1024 * KiB
    fault = fakehub.faults[Q4] = Fault(pause_after=kept)
    cancel = threading.Event()
    worker = threading.Thread(target=lambda: pytest.raises(DownloadCancelled, make_hub(settings).pull, REPO,
                                                           "Q4_1", cancel=cancel))
    worker.start()
    assert fault.reached.wait(10)
    wait_for_size(dest_of(settings).with_name(Q4 + ".part"), kept)
    cancel.set()
    fault.release.set()
    worker.join(10)
    fakehub.faults.pop(Q4)
    ticks = iter(range(10**6))
    updates: list[Progress] = []
    make_hub(settings, clock=lambda: next(ticks) * 0.02).pull(REPO, "Q4_1", on_progress=updates.append)
    assert fakehub.downloads(Q4)[-1] == f"bytes={kept}-"
    # At most one 64 KiB read per 20 ms tick: no honest sample can exceed 3.2 MiB/s.
    top = max(u.speed for u in updates)
    assert 0 < top <= 64 * KiB / 0.02, f"{top / 2**20:.0f} MiB/s counts the resumed bytes"


def test_pull_of_a_missing_repo_says_so_without_httpx_text(settings, fakehub, capsys, monkeypatch):
    from fireside.engine.cli import main

    monkeypatch.setenv("HF_ENDPOINT", fakehub.url)
    fakehub.bare_404 = True  # a 404 with no hub error code, as a mirror or proxy answers
    assert main(["pull", "nobody/NoSuchRepo-GGUF:Q4_0"]) == 1
    err = capsys.readouterr().err
    assert "no such repo or file on the hub: nobody/NoSuchRepo-GGUF" in err
    assert "developer.mozilla.org" not in err and "Client error" not in err


def test_files_fit_prints_the_apps_words(settings, fakehub, capsys, monkeypatch):
    from fireside.engine.cli import main

    monkeypatch.setenv("HF_ENDPOINT", fakehub.url)
    assert main(["files", REPO, "--fit"]) == 0
    out = capsys.readouterr().out
    assert "Runs on the CPU" in out and "cpu_only" not in out


# --- The fit gate: a model that cannot fit is not downloaded without --force ------------------------

def tiny_machine() -> Hardware:
    """A machine with 8 MiB of RAM: nothing fits."""
    return Hardware(llama_cpp_version="test", backends=["CPU"], gpu_offload=False, devices=[], cpu_cores=2,
                    cpu_threads=2, ram_total_bytes=8 * 2**20, ram_available_bytes=8 * 2**20)


def test_cli_pull_refuses_a_model_that_cannot_fit_unless_forced(settings, fakehub, capsys, monkeypatch):
    from fireside.engine.cli import main

    monkeypatch.setenv("HF_ENDPOINT", fakehub.url)
    monkeypatch.setattr(hardware, "detect", lambda refresh=False: tiny_machine())
    assert main(["pull", f"{REPO}:Q4_1"]) == 1
    err = capsys.readouterr().err
    size = human_bytes(len(fakehub.repos[REPO].files[Q4]))
    assert f"{Q4} ({size}) will not fit on this machine: it needs about" in err and "--force" in err
    assert fakehub.downloads(Q4) == [] and not dest_of(settings).exists(), "not one byte was downloaded"
    assert main(["pull", f"{REPO}:Q4_1", "--force"]) == 0
    assert sha(dest_of(settings).read_bytes()) == sha(fakehub.repos[REPO].files[Q4])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this platform")
def test_a_fifo_at_the_part_name_is_a_clear_error_not_a_hang(settings, fakehub):
    # a cancelled pull leaves its part and the sidecar that says what it is of; a FIFO then takes the
    # part's name (another app, a hostile script): the next pull opened it and waited for a writer for ever
    cancel = threading.Event()
    fault = fakehub.faults[Q4] = Fault(pause_after=64 * KiB)
    worker = threading.Thread(target=lambda: pytest.raises(DownloadCancelled, make_hub(settings).pull, REPO,
                                                           "Q4_1", cancel=cancel))
    worker.start()
    assert fault.reached.wait(10)
    cancel.set()
    fault.release.set()
    worker.join(10)
    fakehub.faults.pop(Q4)
    part = dest_of(settings).with_name(Q4 + ".part")
    part.unlink()
    os.mkfifo(part)
    errors: list[BaseException] = []
    pull = threading.Thread(target=lambda: errors.append(pytest.raises(DownloadError, make_hub(settings).pull,
                                                                       REPO, "Q4_1").value), daemon=True)
    pull.start()
    pull.join(10)
    hung = pull.is_alive()
    if hung:  # the old code blocks in open(): a writer lets it go, so the test process can end
        os.close(os.open(part, os.O_WRONLY))
        pull.join(10)
    assert not hung, "the pull hung on the FIFO"
    assert "named pipe" in str(errors[0]) and "remove it" in str(errors[0])
    assert not dest_of(settings).exists()


def test_pulling_a_vision_repo_fetches_the_projector_that_fits_and_pairs_it(settings, fakehub, tmp_path):
    from tests.helpers.vision_model import write_projector

    src = tmp_path / "vlm"
    model = build_gguf(src / "Vis-Q8_0.gguf", n_embd=64, seed=3)
    projectors = {  # the q4_0 is the smallest file and first by name, for another model; the f16 fits best
        "mmproj-Vis-q4_0.gguf": write_projector(src / "a.gguf", n_embd_text=128, file_type=2, n_layers=0),
        "mmproj-Vis-f16.gguf": write_projector(src / "b.gguf", n_embd_text=64, file_type=1, n_layers=3),
        "mmproj-Vis-q8_0.gguf": write_projector(src / "c.gguf", n_embd_text=64, file_type=7, n_layers=3),
    }
    sizes = {name: p.stat().st_size for name, p in projectors.items()}
    assert min(sizes, key=sizes.get) == "mmproj-Vis-q4_0.gguf"
    fakehub.add_repo("pub/Vis-GGUF", {"Vis-Q8_0.gguf": model.read_bytes(),
                                      **{name: p.read_bytes() for name, p in projectors.items()}})
    pulled = make_hub(settings).pull("pub/Vis-GGUF")
    folder = settings.models_dir / "pub/Vis-GGUF"
    assert sorted(p.name for p in folder.iterdir()) == ["Vis-Q8_0.gguf", "mmproj-Vis-f16.gguf"]
    assert pulled.projector == folder / "mmproj-Vis-f16.gguf"
    assert (folder / "mmproj-Vis-f16.gguf").read_bytes() == projectors["mmproj-Vis-f16.gguf"].read_bytes()
    assert fakehub.downloads("mmproj-Vis-q4_0.gguf") == []  # its header was read, never the file
