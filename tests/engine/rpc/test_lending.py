"""The lending side on its own (no namespaces): the worker listens on loopback only, comes back after a
crash (what it printed kept in its log), and ends within a second of sharing stopping."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.helpers.waiting import wait_until


@pytest.fixture
def sharing(lender):
    shared = lender()
    shared.start()
    return shared


def _listening_on(port: int) -> list[str]:
    """The local addresses of the listening TCP sockets on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.rsplit(":", 1)
                if state == "0A" and int(hex_port, 16) == port:
                    found.append(address)
    return found


def test_the_worker_listens_on_loopback_only_restarts_after_a_crash_and_stops_with_sharing(sharing):
    worker = sharing.lender.worker
    port = worker.ensure()
    assert _listening_on(port) == ["0100007F"]  # 127.0.0.1, and nothing else
    first = worker.proc
    first.kill()
    first.wait()
    again = worker.ensure()  # a crash ends the worker alone: the next tunnel starts another
    assert worker.proc.pid != first.pid and worker.proc.poll() is None
    with socket.create_connection(("127.0.0.1", again), timeout=5):
        pass
    said = lambda: worker.log_path.read_text(errors="replace")  # noqa: E731 (what llama.cpp printed, kept)
    wait_until(lambda: said().count("Starting RPC server") == 2, timeout=10)  # in once it flushes (a connection)
    assert f"127.0.0.1:{again}" in said(), said()
    proc, ended = worker.proc, []
    watcher = threading.Thread(target=lambda: (proc.wait(), ended.append(time.monotonic())))
    watcher.start()
    stopped = time.monotonic()
    sharing.stop()
    watcher.join(timeout=10)
    assert ended and ended[0] - stopped < 1.0 and not _listening_on(again)


def test_the_worker_s_log_is_kept_to_a_size(tmp_path, monkeypatch, rpc_built):
    from fireside.engine.rpc import worker

    log = tmp_path / "rpc-worker.log"
    log.write_bytes(b"an old session\n" * 100)
    monkeypatch.setattr(worker, "LOG_KEPT", 1000)
    lent = worker.Worker(1 << 30, 1, rpc_built, log)
    try:
        port = lent.ensure()
    finally:
        lent.stop()
    assert (tmp_path / "rpc-worker.log.1").read_bytes() == b"an old session\n" * 100
    assert log.read_text().startswith("--- ") and f"127.0.0.1:{port}" in log.read_text()
