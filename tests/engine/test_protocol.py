"""The runner pipe's framing over a real OS pipe. The runner writes with ``background=True``: its decode
thread hands each frame to the pipe's own writer thread and goes on decoding, so a parent slow to read
never holds up a token, and every frame still arrives, in order, once the parent reads."""

from __future__ import annotations

import os
import threading

import pytest

from fireside.engine.protocol import FramedPipe, PipeClosed


def _pipes():
    r, w = os.pipe()
    return os.fdopen(r, "rb", buffering=0), os.fdopen(w, "wb", buffering=0)


def test_a_background_writer_never_blocks_the_sender_and_keeps_every_frame_in_order():
    reader, writer = _pipes()
    sending, receiving = FramedPipe(None, writer, background=True), FramedPipe(reader, None)
    frames = [{"id": "r1", "type": "text", "n": i, "text": "x" * 200} for i in range(2000)]  # ~0.5 MB: 8 pipes full
    sent = threading.Event()

    def send_all():
        for frame in frames:
            sending.send(frame)
        sent.set()

    threading.Thread(target=send_all, daemon=True).start()
    assert sent.wait(10), "sending blocked although nobody was reading yet"  # a plain FramedPipe would wait here
    assert [receiving.recv()["n"] for _ in frames] == list(range(len(frames)))
    sending.close()
    writer.close()
    with pytest.raises(PipeClosed):
        receiving.recv()


def test_close_writes_what_is_queued_and_a_gone_reader_is_said_on_a_later_send():
    reader, writer = _pipes()
    sending = FramedPipe(None, writer, background=True)
    sending.send({"id": "", "type": "hello"})
    sending.close()  # before os._exit in the runner: the last frames reach the parent
    assert FramedPipe(reader, None).recv() == {"id": "", "type": "hello"}
    reader.close()
    gone = FramedPipe(None, writer, background=True)
    with pytest.raises(PipeClosed):
        for _ in range(100):  # the first write finds the reader gone; the sends after it say so
            gone.send({"id": "r2", "type": "text"})
            threading.Event().wait(0.01)


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="thread priorities are POSIX")
def test_the_runner_pipes_writer_thread_runs_below_the_decode_threads_and_still_writes_every_frame():
    from fireside.engine.runner.threads import yield_cpu

    reader, writer = _pipes()
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    started: list[tuple[int, int]] = []  # (native thread id, its nice value) of the thread the hook ran on

    def lowered() -> None:
        yield_cpu()  # what the runner passes (runner/process.py)
        started.append((threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))

    sending = FramedPipe(None, writer, background=True, writer_start=lowered)
    receiving = FramedPipe(reader, None)
    for i in range(50):
        sending.send({"id": "r1", "type": "text", "n": i})
    assert [receiving.recv()["n"] for _ in range(50)] == list(range(50))
    (tid, nice), = started
    assert tid != threading.get_native_id(), "the hook ran on the sender's thread, not the writer's"
    if os.uname().sysname == "Linux":  # a thread has a nice value of its own there
        assert nice >= 10, f"the pipe's writer runs at nice {nice}: every token's write takes a decode thread's core"
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # the sender keeps its priority
    sending.close()
