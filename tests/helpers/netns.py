"""Two machines on one host: network namespaces joined by a veth pair, for tests where mDNS, TLS and
pairing must cross a real network stack.

``namespaces()`` makes ``fs-PID-a`` and ``fs-PID-b`` (10.77.PID%250.1 and .2 on a /24 that exists only
between them; no other address is ever used) and deletes them afterwards, which also removes the
veth pair. It needs root and ``ip netns``; ``why_not()`` says why they cannot be made, for a skip.
``Device`` runs ``fireside`` commands inside one namespace as a user would, with its own
``FIRESIDE_HOME`` and its own keyring file (``keyrings.FileKeyring``); ``in_netns`` runs a function
on a thread that has joined a namespace (``setns`` applies to the calling thread only), so the test's
own clients (``openai``, the mDNS browser) speak from inside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from fireside.engine.procs import stop_process

ROOT = Path(__file__).resolve().parents[2]
CLONE_NEWNET = 0x40000000


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


def why_not() -> str | None:
    """None when namespaces can be made here, else the reason (for ``pytest.skip``)."""
    if sys.platform != "linux":
        return "network namespaces are Linux-only"
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    probe = f"fs-{os.getpid()}-probe"
    made = _ip("netns", "add", probe)
    if made.returncode != 0:
        return f"`ip netns add` failed here: {made.stderr.strip()}"
    _ip("netns", "del", probe)
    return None


@contextlib.contextmanager
def namespaces() -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """``((ns_a, ip_a), (ns_b, ip_b))``: two namespaces with loopback up, joined by a veth pair."""
    tag = f"fs-{os.getpid()}"
    ns_a, ns_b = f"{tag}-a", f"{tag}-b"
    net = f"10.77.{os.getpid() % 250}"
    ip_a, ip_b = f"{net}.1", f"{net}.2"
    steps = [("netns", "add", ns_a), ("netns", "add", ns_b),
             ("link", "add", f"{tag}a", "type", "veth", "peer", "name", f"{tag}b"),
             ("link", "set", f"{tag}a", "netns", ns_a), ("link", "set", f"{tag}b", "netns", ns_b)]
    for ns, dev, ip in ((ns_a, f"{tag}a", ip_a), (ns_b, f"{tag}b", ip_b)):
        steps += [("-n", ns, "link", "set", "lo", "up"), ("-n", ns, "addr", "add", f"{ip}/24", "dev", dev),
                  ("-n", ns, "link", "set", dev, "up", "multicast", "on")]
    try:
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                raise RuntimeError(f"ip {' '.join(step)}: {done.stderr.strip()}")
        yield (ns_a, ip_a), (ns_b, ip_b)
    finally:
        for ns in (ns_a, ns_b):
            _ip("netns", "del", ns)


def in_netns(ns: str, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` on a thread that has joined ``ns``; its result, or its exception raised here."""
    out: dict = {}

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {ns} failed")
        finally:
            os.close(fd)
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller's thread
            out["error"] = exc

    thread = threading.Thread(target=run, name=f"netns-{ns}")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")


@dataclass
class Device:
    """One Fireside install inside namespace ``ns``: its home, its keyring file, its commands."""

    ns: str
    home: Path
    proc: subprocess.Popen | None = None  # the server ``serve`` started last
    verbose: bool = False  # its commands log from INFO up (``FIRESIDE_LOG``): a failed test's evidence

    @property
    def env(self) -> dict[str, str]:
        pythonpath = os.pathsep.join([os.environ.get("PYTHONPATH", ""), str(ROOT)]).strip(os.pathsep)
        return {**os.environ, "FIRESIDE_HOME": str(self.home), "FIRESIDE_TEST_KEYRING": str(self.home / "keys.json"),
                "PYTHON_KEYRING_BACKEND": "tests.helpers.keyrings.FileKeyring", "PYTHONPATH": pythonpath,
                "PYTHONUNBUFFERED": "1", **({"FIRESIDE_LOG": "INFO"} if self.verbose else {})}

    def command(self, *args: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns, sys.executable, "-m", "fireside.engine", *args]

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        self.home.mkdir(parents=True, exist_ok=True)
        return subprocess.run(self.command(*args), env=self.env, capture_output=True, text=True, timeout=timeout)

    @contextlib.contextmanager
    def serve(self, *args: str, timeout: float = 60) -> Iterator[Path]:
        """``fireside serve ARGS`` in the namespace until the block ends (SIGTERM); yields its log."""
        self.home.mkdir(parents=True, exist_ok=True)
        log = self.home / f"serve-{time.monotonic_ns()}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(self.command("serve", *args), env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.proc = proc
        try:
            deadline = time.monotonic() + timeout
            while "Ctrl-C stops it." not in log.read_text(errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"fireside serve in {self.ns} did not start: {log.read_text()[-2000:]}")
                time.sleep(0.05)
            yield log
        finally:
            stop_process(proc, grace_s=30)

    def crash(self) -> None:
        """Kill the running server and its model runners at once (SIGKILL), as a crash or a power cut
        of the process would: the kernel closes its connections, nothing is said goodbye."""
        assert self.proc is not None and self.proc.poll() is None
        children = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _parent(p) == self.proc.pid]
        self.proc.kill()
        self.proc.wait()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _parent(proc_dir: Path) -> int | None:
    try:
        return int((proc_dir / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None
