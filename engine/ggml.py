"""llama.cpp's ggml library through ctypes: its backend device API (``ggml_backend_dev_*``), which
llama-cpp-python does not bind. On the ground floor because two processes read it: the server's
(``models/hardware.py`` lists devices and their free memory) and a runner's (``runner/process.py``
hands a load the devices it may use).
"""

from __future__ import annotations

import ctypes
import functools
import sys
from pathlib import Path

from .errors import HardwareError


def lib_dir() -> Path:
    """Where llama-cpp-python keeps its shared libraries (an installer bundle puts them there too)."""
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """libggml with the device functions' argument types set; loaded once per process. Raises
    ``HardwareError`` when the library is not where llama-cpp-python keeps it."""
    # Importing llama_cpp loads libllama and, through it, libggml with its backends registered.
    import llama_cpp  # noqa: F401

    names = {"linux": ["libggml.so"], "darwin": ["libggml.dylib"], "win32": ["ggml.dll"]}
    for name in names.get(sys.platform, ["libggml.so"]):
        path = lib_dir() / name
        if path.exists():
            lib = ctypes.CDLL(str(path))
            break
    else:
        raise HardwareError(f"llama.cpp's ggml library was not found in {lib_dir()}")
    c_p, c_sz = ctypes.c_void_p, ctypes.c_size_t
    for fn, args, res in [
        ("ggml_backend_reg_count", [], c_sz),
        ("ggml_backend_reg_get", [c_sz], c_p),
        ("ggml_backend_reg_name", [c_p], ctypes.c_char_p),
        ("ggml_backend_dev_count", [], c_sz),
        ("ggml_backend_dev_get", [c_sz], c_p),
        ("ggml_backend_dev_name", [c_p], ctypes.c_char_p),
        ("ggml_backend_dev_description", [c_p], ctypes.c_char_p),
        ("ggml_backend_dev_memory", [c_p, ctypes.POINTER(c_sz), ctypes.POINTER(c_sz)], None),
        ("ggml_backend_dev_type", [c_p], ctypes.c_int),
        ("ggml_backend_dev_backend_reg", [c_p], c_p),
        ("ggml_backend_dev_by_name", [ctypes.c_char_p], c_p),
        ("ggml_backend_dev_by_type", [ctypes.c_int], c_p),
        ("ggml_backend_dev_buffer_type", [c_p], c_p),
    ]:
        f = getattr(lib, fn)
        f.argtypes, f.restype = args, res
    return lib


def device_handles(names: list[str]) -> ctypes.Array:
    """A NULL-terminated array of ggml's handles for the devices called ``names``, as
    ``llama_model_params.devices`` takes it (an empty list: no offload device at all). Raises
    ``HardwareError`` for a name ggml does not know. The caller keeps the array alive while it loads."""
    lib = library()
    handles = (ctypes.c_void_p * (len(names) + 1))()
    for i, name in enumerate(names):
        handle = lib.ggml_backend_dev_by_name(name.encode())
        if not handle:
            raise HardwareError(f"llama.cpp has no device called {name!r}")
        handles[i] = handle
    return handles


DEVICE_CPU = 0  # enum ggml_backend_dev_type


class _TensorPlace(ctypes.Structure):
    """``struct llama_model_tensor_buft_override``: tensors whose name matches ``pattern`` (a regex) are
    allocated in ``buft``."""
    _fields_ = [("pattern", ctypes.c_char_p), ("buft", ctypes.c_void_p)]


def host_overrides(patterns: list[str]) -> ctypes.Array:
    """A NULL-terminated array that keeps the tensors matching each of ``patterns`` in host memory (the CPU
    device's buffer type), as ``llama_model_params.tensor_buft_overrides`` takes it: llama-server's
    ``-ot PATTERN=CPU``. The caller keeps the array alive while it loads."""
    lib = library()
    cpu = lib.ggml_backend_dev_by_type(DEVICE_CPU)
    if not cpu:
        raise HardwareError("llama.cpp has no CPU device to keep tensors on")
    buft = lib.ggml_backend_dev_buffer_type(cpu)
    places = (_TensorPlace * (len(patterns) + 1))()
    for i, pattern in enumerate(patterns):
        places[i].pattern, places[i].buft = pattern.encode(), buft
    return places


# --- llama.cpp's RPC backend (``engine/rpc``): layers on another machine's memory -------------------------
RPC_MODULE = {"linux": "libggml-rpc.so", "darwin": "libggml-rpc.dylib", "win32": "ggml-rpc.dll"}.get(sys.platform,
                                                                                                   "libggml-rpc.so")


def rpc_built_in() -> bool:
    """Whether llama-cpp-python was built with ``-DGGML_RPC=on`` (its own RPC library beside libggml)."""
    return (lib_dir() / RPC_MODULE).exists()


@functools.lru_cache(maxsize=1)
def _rpc_cached(module: str | None) -> ctypes.CDLL:
    lib = library()
    if rpc_built_in():
        rpc = ctypes.CDLL(str(lib_dir() / RPC_MODULE))
    elif module and Path(module).exists():
        lib.ggml_backend_load.argtypes, lib.ggml_backend_load.restype = [ctypes.c_char_p], ctypes.c_void_p
        if not lib.ggml_backend_load(str(module).encode()):  # registers "RPC", as a -DGGML_RPC=on build would
            raise HardwareError(f"llama.cpp could not load its RPC backend from {module}")
        rpc = ctypes.CDLL(str(module))
    else:
        raise HardwareError("this llama.cpp has no RPC backend and Fireside's build of it was not found: reinstall "
                            "llama-cpp-python with CMAKE_ARGS=-DGGML_RPC=on, or lend or load again to build it")
    c_p, c_sz = ctypes.c_void_p, ctypes.c_size_t
    for owner, fn, args, res in [
        (rpc, "ggml_backend_rpc_add_server", [ctypes.c_char_p], c_p),
        (rpc, "ggml_backend_rpc_start_server", [ctypes.c_char_p, ctypes.c_char_p, c_sz, c_sz, ctypes.POINTER(c_p)], None),
        (lib, "ggml_backend_reg_dev_count", [c_p], c_sz),
        (lib, "ggml_backend_reg_dev_get", [c_p, c_sz], c_p),
        (lib, "ggml_backend_device_register", [c_p], None),
    ]:
        f = getattr(owner, fn)
        f.argtypes, f.restype = args, res
    return rpc


def rpc_library(module: str | None = None) -> ctypes.CDLL:
    """llama.cpp's RPC backend, loaded once per process: the build's own when it has one, else the module
    Fireside built for this llama.cpp (``rpc/build.py``) at ``module``. Raises ``HardwareError`` without."""
    return _rpc_cached(str(module) if module else None)


def rpc_devices(endpoints: list[str], module: str | None = None) -> list[str]:
    """Register the RPC servers at ``endpoints`` (``host:port``, in order) with ggml and return their devices'
    names (``RPC0``, ...), which ``device_handles`` then finds. Connects to each at once: llama.cpp aborts the
    process when one cannot be reached, so only a runner (a process of its own) calls this."""
    rpc, lib, names = rpc_library(module), library(), []
    for endpoint in endpoints:
        reg = rpc.ggml_backend_rpc_add_server(endpoint.encode())
        if not reg:
            raise HardwareError(f"the RPC server at {endpoint} offers no device")
        for i in range(lib.ggml_backend_reg_dev_count(reg)):
            dev = lib.ggml_backend_reg_dev_get(reg, i)
            name = lib.ggml_backend_dev_name(dev).decode()
            if not lib.ggml_backend_dev_by_name(name.encode()):
                lib.ggml_backend_device_register(dev)
            names.append(name)
    return names


def rpc_serve(endpoint: str, threads: int, module: str | None = None) -> None:
    """Serve this machine's CPU to RPC clients at ``endpoint`` (loopback only: the caller's tunnel is the
    way in). Blocks for good; returns only when the server could not start."""
    rpc, lib = rpc_library(module), library()
    cpu = lib.ggml_backend_dev_by_type(DEVICE_CPU)
    devices = (ctypes.c_void_p * 1)(cpu)
    rpc.ggml_backend_rpc_start_server(endpoint.encode(), None, threads, 1, devices)
