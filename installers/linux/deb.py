"""Packs a frozen Fireside bundle into a ``.deb``: the bundle under ``/opt/fireside``, ``fireside`` and
``fireside-app`` on the PATH, a desktop entry and the icon in every hicolor size.

Depends is worked out from the bundle itself: every shared library its ELF files need that it does not
carry is looked up with ``ldconfig -p`` and ``dpkg -S``, so it names the system packages Qt's xcb
platform plugin and the Python runtime actually load, as this build machine's distribution calls them.
Debian's dpkg triggers refresh the icon cache and the desktop database, so no maintainer scripts.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from fireside.app.systemlibs import DEBIAN_PACKAGES

PREFIX = "opt/fireside"
EXECUTABLE = "Fireside"
DESKTOP_FILE = Path(__file__).resolve().parent / "fireside.desktop"
# glibc's own libraries: one versioned libc6 dependency covers them all.
_GLIBC = re.compile(r"^(libc|libm|libdl|libpthread|librt|libutil|ld-linux[-\w]*)\.so")


@dataclass
class Deb:
    path: Path
    installed_bytes: int
    depends: list[str]
    missing: list[str]  # libraries some optional plugin wants that this machine does not have


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _needed(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _system_libs() -> dict[str, str]:
    """soname -> path from the dynamic linker's cache, this machine's architecture first."""
    libs: dict[str, str] = {}
    for line in _run("ldconfig", "-p").splitlines()[1:]:
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and (m.group(1) not in libs or "x86-64" in m.group(2) or "64" in m.group(2)):
            libs.setdefault(m.group(1), m.group(3))
    return libs


def _owner(path: str) -> str | None:
    """The package that installed ``path``, trying the /usr-merged twin too."""
    real = os.path.realpath(path)
    for candidate in dict.fromkeys([path, real, real.removeprefix("/usr"), "/usr" + path]):
        out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.split(":", 1)[0].strip()
    return None


def _upstream_version(package: str) -> str:
    version = _run("dpkg-query", "-W", "-f=${Version}", package)
    return re.sub(r"-[^-]*$", "", version.split(":", 1)[-1])


def depends(bundle: Path) -> tuple[list[str], list[str]]:
    """The system packages the bundle's libraries need, and the sonames no package here provides."""
    carried, wanted = set(), {}
    for path in bundle.rglob("*"):
        if path.is_file() or path.is_symlink():
            carried.add(path.name)
        if path.is_file() and not path.is_symlink() and _is_elf(path):
            for soname in _needed(path):
                wanted.setdefault(soname, path)
    system = _system_libs()
    packages, missing = set(), []
    for soname in sorted(set(wanted) - carried):
        if _GLIBC.match(soname):
            packages.add("libc6")
            continue
        owner = _owner(system[soname]) if soname in system else None
        if owner:
            packages.add(owner.split(":")[0])
        elif soname in DEBIAN_PACKAGES:  # Qt's xcb plugin needs it, though this build machine lacks it
            packages.add(DEBIAN_PACKAGES[soname])
        else:
            missing.append(f"{soname} (for {wanted[soname].relative_to(bundle)})")
    deps = [f"libc6 (>= {_upstream_version('libc6')})" if p == "libc6" else p for p in sorted(packages)]
    return deps, missing


def _stage(bundle: Path, stage: Path, icons: dict[int, Path], svg: Path) -> None:
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(bundle, stage / PREFIX, symlinks=True)
    bin_dir = stage / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("fireside", "fireside-app"):  # entry.py picks the CLI by the name "fireside"
        (bin_dir / name).symlink_to(f"/{PREFIX}/{EXECUTABLE}")
    apps = stage / "usr" / "share" / "applications"
    apps.mkdir(parents=True)
    shutil.copy(DESKTOP_FILE, apps / "fireside.desktop")
    hicolor = stage / "usr" / "share" / "icons" / "hicolor"
    for size, png in icons.items():
        dest = hicolor / f"{size}x{size}" / "apps" / "fireside.png"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(png, dest)
    (hicolor / "scalable" / "apps").mkdir(parents=True)
    shutil.copy(svg, hicolor / "scalable" / "apps" / "fireside.svg")
    for path in stage.rglob("*"):  # dpkg wants 0755 folders and no group/other write bits
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)


def _tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def build(bundle: Path, out_dir: Path, *, version: str, icons: dict[int, Path], svg: Path,
          description: str) -> Deb:
    """Stage ``bundle`` (the PyInstaller ``Fireside`` folder) and build ``out_dir/fireside_<v>_<arch>.deb``."""
    arch = _run("dpkg", "--print-architecture").strip()
    stage = out_dir / "deb-root"
    _stage(bundle, stage, icons, svg)
    deps, missing = depends(stage / PREFIX)
    installed = _tree_bytes(stage)
    summary, _, body = description.partition("\n")
    control = stage / "DEBIAN" / "control"
    control.parent.mkdir()
    control.write_text(
        f"Package: fireside\nVersion: {version}\nSection: utils\nPriority: optional\n"
        f"Architecture: {arch}\nMaintainer: Fireside developers <fireside@localhost>\n"
        f"Installed-Size: {(installed + 1023) // 1024}\nDepends: {', '.join(deps)}\n"
        f"Description: {summary}\n" + "".join(f" {line or '.'}\n" for line in body.strip().splitlines()),
        encoding="utf-8",
    )
    deb = out_dir / f"fireside_{version}_{arch}.deb"
    # zstd: every dpkg new enough for the libc6 this bundle needs reads it (dpkg >= 1.21.18), and it
    # packs the bundle in seconds where xz takes minutes on two cores.
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zzstd", "--build", str(stage), str(deb)], check=True,
                   stdout=subprocess.DEVNULL)
    return Deb(deb, installed, deps, missing)
