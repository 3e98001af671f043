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
