"""What this machine can run models on: llama.cpp's backends and devices, system RAM and CPU cores.

Devices come from ggml's backend device API (``ggml_backend_dev_*``) in the shared libraries that
llama-cpp-python ships, read with ctypes, so Fireside sees exactly the devices its llama.cpp build
will use: a CUDA build lists each NVIDIA GPU with its free memory, a Metal build the Apple GPU, a
CPU-only build just the CPU. ``detect()`` caches its answer; ``detect(refresh=True)`` re-reads free
memory. Runs on any thread. An installer bundle also says which backend it built llama.cpp for
(``built_for``, from the ``fireside_build.json`` that ``installers/fireside.spec`` writes).
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from ..errors import HardwareError

# enum ggml_backend_dev_type, in the order ggml.h declares it (IGPU arrived after GPU).
_DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}


@dataclass(frozen=True)
class Device:
    """One device llama.cpp can place tensors on."""

    index: int
    name: str
    description: str
    kind: str  # "cpu", "gpu", "igpu" or "accel"
    backend: str  # the registry it comes from: "CPU", "CUDA", "Metal", "Vulkan", ...
    total_bytes: int
    free_bytes: int

    @property
    def is_gpu(self) -> bool:
        return self.kind in ("gpu", "igpu")


@dataclass(frozen=True)
class Hardware:
    backends: list[str]
    devices: list[Device]
    ram_total_bytes: int
    ram_available_bytes: int
    cpu_cores: int
    cpu_threads: int
    gpu_offload: bool
    system_info: str = ""
    llama_cpp_version: str = ""
    notes: list[str] = field(default_factory=list)
    built_for: str = ""  # the installer's llama.cpp backend ("cpu", "cuda", ...); "" for a pip install

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.is_gpu]

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def build_info() -> dict[str, object]:
    """What the installer recorded about this bundle (backend, llama-cpp-python version, date), or {}
    when Fireside runs from a pip install rather than a frozen bundle."""
    if not getattr(sys, "frozen", False):
        return {}
    for folder in (getattr(sys, "_MEIPASS", None), os.path.dirname(sys.executable)):
        path = Path(folder or ".") / "fireside_build.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
    return {}


def _lib_dir() -> Path:
    import llama_cpp

    return Path(llama_cpp.__file__).parent / "lib"


def _load_ggml() -> ctypes.CDLL:
    # Importing llama_cpp loads libllama and, through it, libggml with its backends registered.
    import llama_cpp  # noqa: F401

    names = {"linux": ["libggml.so"], "darwin": ["libggml.dylib"], "win32": ["ggml.dll"]}
    candidates = names.get(sys.platform, ["libggml.so"])
    for name in candidates:
        path = _lib_dir() / name
        if path.exists():
            lib = ctypes.CDLL(str(path))
            break
    else:
        raise HardwareError(f"llama.cpp's ggml library was not found in {_lib_dir()}")
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
    ]:
        f = getattr(lib, fn)
        f.argtypes, f.restype = args, res
    return lib


def _read_devices(lib: ctypes.CDLL) -> tuple[list[str], list[Device]]:
    backends = [lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)).decode()
                for i in range(lib.ggml_backend_reg_count())]
    devices = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        reg = lib.ggml_backend_dev_backend_reg(dev)
        devices.append(Device(
            index=i,
            name=(lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
            description=(lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace"),
            kind=_DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "accel"),
            backend=lib.ggml_backend_reg_name(reg).decode() if reg else "",
            total_bytes=total.value,
            free_bytes=free.value,
        ))
    return backends, devices


@functools.lru_cache(maxsize=1)
def _cached() -> Hardware:
    return _detect()


def detect(refresh: bool = False) -> Hardware:
    """This machine's hardware as llama.cpp sees it. Raises ``HardwareError`` if ggml cannot be read."""
    if refresh:
        _cached.cache_clear()
    return _cached()


def _detect() -> Hardware:
    import llama_cpp

    try:
        lib = _load_ggml()
        backends, devices = _read_devices(lib)
    except (OSError, AttributeError) as exc:
        raise HardwareError(f"could not read llama.cpp's devices: {exc}") from exc
    mem = psutil.virtual_memory()
    notes = []
    gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
    if not any(d.is_gpu for d in devices):
        notes.append("no GPU backend in this llama.cpp build: models run on the CPU")
    return Hardware(
        backends=backends,
        devices=devices,
        ram_total_bytes=mem.total,
        ram_available_bytes=mem.available,
        cpu_cores=psutil.cpu_count(logical=False) or os.cpu_count() or 1,
        cpu_threads=os.cpu_count() or 1,
        gpu_offload=gpu_offload,
        system_info=llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        llama_cpp_version=getattr(llama_cpp, "__version__", ""),
        notes=notes,
        built_for=str(build_info().get("backend", "")),
    )


def engine_build(hw: Hardware) -> str:
    """Which llama.cpp this is, in words: the installer's backend, or a build made by pip here."""
    if hw.built_for:
        return f"{hw.built_for} (from the installer)"
    return "built by pip on this machine (llama-cpp-python from source)"
