"""llama.cpp's RPC backend for an install built without it: compiled here, once, as a ggml backend module.

A wheel that pip built earlier without ``-DGGML_RPC=on`` (pip's cache keys a built wheel by the sdist, not
by ``CMAKE_ARGS``) stays in use, and rebuilding all of llama.cpp for one backend costs minutes. The RPC
backend is two C++ files that only need ggml's headers and ``libggml-base``: ``module()`` compiles them
from the sdist of the very llama-cpp-python version installed (fetched by pip, the same source the install
built) into a module that ggml loads at run time (``ggml.rpc_library``), as a ``-DGGML_RPC=on`` build
would have linked it. About five seconds on two cores, kept per llama.cpp build under the cache folder.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from pathlib import Path

from ..errors import HardwareError
from ..ggml import RPC_MODULE, lib_dir, rpc_built_in

log = logging.getLogger(__name__)
BUILD_TIMEOUT_S = 600
# what the module needs from the sdist: ggml's public headers, its internal ones, the backend's sources
_lock = threading.Lock()
_made: dict[str, Path] = {}  # what this process built, by build folder name: other cache folders link to it
_MEMBERS = ("vendor/llama.cpp/ggml/include/", "vendor/llama.cpp/ggml/src/ggml-rpc/")


def _installed() -> tuple[str, str]:
    """llama-cpp-python's version and a stamp of the ggml library it carries (a rebuild changes it)."""
    import llama_cpp

    base = next(lib_dir().glob("*ggml-base*"), None)
    st = base.stat() if base else None
    stamp = hashlib.sha256(f"{base}:{st.st_size if st else 0}:{st.st_mtime_ns if st else 0}".encode()).hexdigest()[:12]
    return llama_cpp.__version__, stamp


def module_path(cache_dir: Path) -> Path | None:
    """Where this install's RPC module is (or would be) kept; None when llama.cpp has RPC built in."""
    if rpc_built_in():
        return None
    version, stamp = _installed()
    return Path(cache_dir) / "rpc" / f"{version}-{stamp}" / RPC_MODULE


def module(cache_dir: Path, on_progress=None) -> Path | None:
    """The RPC module for this install, compiled first when missing; None when llama.cpp has RPC built in.
    Raises ``HardwareError`` saying what is missing (a C++ compiler, the sdist) when it cannot be built."""
    path = module_path(cache_dir)
    if path is None or path.exists():
        return path
    with _lock:
        return _made_here(path) or _build(path, on_progress)


def _made_here(path: Path) -> Path | None:
    """``path`` linked (or copied) to the module this process already built into another cache folder."""
    earlier = _made.get(path.parent.name)
    if path.exists() or earlier is None or not earlier.exists():
        return path if path.exists() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(f".{os.getpid()}.part")
    try:
        os.link(earlier, part)
    except OSError:
        shutil.copyfile(earlier, part)
    os.replace(part, path)
    return path


def _build(path: Path, on_progress) -> Path:
    if sys.platform == "win32":
        raise HardwareError("lending memory on Windows needs llama-cpp-python built with CMAKE_ARGS=-DGGML_RPC=on")
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if not compiler:
        raise HardwareError("building llama.cpp's RPC backend needs a C++ compiler (the one that built "
                            "llama-cpp-python); install g++ or clang++, or reinstall llama-cpp-python with "
                            "CMAKE_ARGS=-DGGML_RPC=on")
    version, _ = _installed()
    if on_progress:
        on_progress(f"building llama.cpp's RPC backend for llama-cpp-python {version} (once)")
    with tempfile.TemporaryDirectory(prefix="fireside-rpc-") as tmp:
        src = _source(version, Path(tmp))
        out = path.with_suffix(f".{os.getpid()}.part")
        out.parent.mkdir(parents=True, exist_ok=True)
        ggml = src / "vendor" / "llama.cpp" / "ggml"
        base = next(lib_dir().glob("*ggml-base.*"))
        cmd = [compiler, "-O2", "-std=c++17", "-fPIC", "-shared", "-pthread",
               "-DGGML_BACKEND_DL", "-DGGML_BACKEND_BUILD", "-DGGML_BACKEND_SHARED", "-DGGML_SHARED",
               f"-I{ggml / 'include'}", f"-I{ggml / 'src'}",
               str(ggml / "src" / "ggml-rpc" / "ggml-rpc.cpp"), str(ggml / "src" / "ggml-rpc" / "transport.cpp"),
               str(base), f"-Wl,-rpath,{lib_dir()}", "-o", str(out)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
        if done.returncode != 0:
            raise HardwareError(f"building llama.cpp's RPC backend with {compiler} failed (exit {done.returncode}): "
                                f"{done.stderr.strip()[-800:] or 'no output'}; fix the compiler, or reinstall "
                                f"llama-cpp-python with CMAKE_ARGS=-DGGML_RPC=on (pip install --no-cache-dir)")
        os.replace(out, path)
    log.info("built llama.cpp's RPC backend at %s", path)
    _made[path.parent.name] = path
    return path


def _source(version: str, into: Path) -> Path:
    """The sdist of llama-cpp-python ``version``, fetched by pip, with only the members the module needs."""
    got = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                          "--disable-pip-version-check", f"llama-cpp-python=={version}", "-d", str(into)],
                         capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    archive = next(into.glob("llama_cpp_python-*.tar.gz"), None)
    if got.returncode != 0 or archive is None:
        raise HardwareError(f"building llama.cpp's RPC backend needs llama-cpp-python {version}'s source, which "
                            f"pip could not fetch: {got.stderr.strip()[-400:] or 'no archive'}")
    root = into / "src"
    with tarfile.open(archive) as tar:
        members = []
        for m in tar.getmembers():
            inner = m.name.split("/", 1)[1] if "/" in m.name else ""
            if m.isfile() and (inner.startswith(_MEMBERS) or (inner.startswith("vendor/llama.cpp/ggml/src/")
                                                               and inner.count("/") == 4 and inner.endswith(".h"))):
                m.name = inner
                members.append(m)
        tar.extractall(root, members=members, filter="data")
    return root
