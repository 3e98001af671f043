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

from .. import ggml
from ..errors import HardwareError

# enum ggml_backend_dev_type, in the order ggml.h declares it (IGPU arrived after GPU).
_DEVICE_TYPES = {0: "cpu", 1: "gpu", 2: "igpu", 3: "accel"}
# Vulkan drivers that run on the CPU (Mesa's llvmpipe, Google's SwiftShader): real devices, slower than
# llama.cpp's own CPU path. ggml reports them as integrated GPUs; Fireside calls them "software".
_SOFTWARE_DRIVERS = ("llvmpipe", "lavapipe", "swiftshader")


@dataclass(frozen=True)
class Device:
    """One device llama.cpp can place tensors on."""

    index: int
    name: str
    description: str
    kind: str  # "cpu", "gpu", "igpu", "accel", "software" (a Vulkan driver that runs on the CPU) or "remote"
    # (a paired device's lent memory, ``rpc/``, listed only for a load that names it)
    backend: str  # the registry it comes from: "CPU", "CUDA", "Metal", "Vulkan", ...
    total_bytes: int
    free_bytes: int

    @property
    def is_gpu(self) -> bool:
        """A device the planner offloads to on its own; a software device is not one (only when named)."""
        return self.kind in ("gpu", "igpu")

    @property
    def can_offload(self) -> bool:
        """A device layers can be placed on when a load names it (``LoadOptions.device``)."""
        return self.kind in ("gpu", "igpu", "software", "remote")


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
    huge_pages: str = ""  # Linux's transparent huge pages where glibc's malloc can ask for them: "always",
    #                       "madvise" or "never" (/sys/kernel/mm/transparent_hugepage/enabled); "" elsewhere

    @property
    def gpus(self) -> list[Device]:
        return [d for d in self.devices if d.is_gpu]

    @property
    def huge_page_weights(self) -> bool:
        """Whether CPU loads here may read their weights into huge pages (``planner.huge_pages``): the
        kernel's transparent huge pages on for glibc's malloc, and the CPU the machine's only device."""
        return self.huge_pages in ("always", "madvise") and all(d.kind == "cpu" for d in self.devices)

    @property
    def remote(self) -> list[Device]:
        """Paired devices' lent memory, present only in a load's hardware that names them (``rpc/``)."""
        return [d for d in self.devices if d.kind == "remote"]

    @property
    def software(self) -> list[Device]:
        return [d for d in self.devices if d.kind == "software"]

    def named(self, name: str) -> Device | None:
        """The offload device called ``name`` (its ggml name such as ``Vulkan0``, its index, or a word of
        its description such as ``llvmpipe``), or None."""
        wanted = name.strip().lower()
        for d in self.devices:
            if d.can_offload and d.kind != "remote" and wanted in (d.name.lower(), str(d.index)):
                return d
        matches = [d for d in self.devices if d.can_offload and d.kind != "remote" and wanted
                   and wanted in d.description.lower()]
        return matches[0] if len(matches) == 1 else None

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


def _read_devices(lib: ctypes.CDLL) -> tuple[list[str], list[Device]]:
    backends = [lib.ggml_backend_reg_name(lib.ggml_backend_reg_get(i)).decode()
                for i in range(lib.ggml_backend_reg_count())]
    devices = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        lib.ggml_backend_dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        reg = lib.ggml_backend_dev_backend_reg(dev)
        description = (lib.ggml_backend_dev_description(dev) or b"").decode(errors="replace")
        kind = _DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "accel")
        if kind != "cpu" and any(word in description.lower() for word in _SOFTWARE_DRIVERS):
            kind = "software"
        devices.append(Device(
            index=i,
            name=(lib.ggml_backend_dev_name(dev) or b"").decode(errors="replace"),
            description=description,
            kind=kind,
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
        backends, devices = _read_devices(ggml.library())
    except (OSError, AttributeError) as exc:
        raise HardwareError(f"could not read llama.cpp's devices: {exc}") from exc
    mem = psutil.virtual_memory()
    notes = []
    gpu_offload = bool(llama_cpp.llama_supports_gpu_offload())
    if any(d.kind == "software" for d in devices):
        notes.append("a software Vulkan device (it runs on the CPU, slower than llama.cpp's CPU path) is used only "
                     "when a load names it (--device)")
    elif not any(d.is_gpu for d in devices) and "Vulkan" in backends:
        notes.append("no Vulkan GPU found: models run on the CPU (llama.cpp hides software Vulkan devices such as "
                     "Mesa's llvmpipe unless GGML_VK_VISIBLE_DEVICES names them, e.g. GGML_VK_VISIBLE_DEVICES=0)")
    elif not any(d.is_gpu for d in devices):
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
        huge_pages=huge_pages_mode(),
    )


def huge_pages_mode() -> str:
    """The kernel's transparent huge pages mode (the bracketed word of its setting) on Linux with glibc,
    whose ``glibc.malloc.hugetlb`` tunable asks for them (``runtime/client.py``); "" anywhere else."""
    import platform

    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return ""
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return ""
    chosen = [w[1:-1] for w in setting.split() if w.startswith("[") and w.endswith("]")]
    return chosen[0] if chosen else ""


def engine_build(hw: Hardware) -> str:
    """Which llama.cpp this is, in words: the installer's backend, or a build made by pip here."""
    if hw.built_for:
        return f"{hw.built_for} (from the installer)"
    return "built by pip on this machine (llama-cpp-python from source)"
