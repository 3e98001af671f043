"""Before the first window on Linux: does Qt's X11 platform plugin have the system libraries it needs?

PySide6's wheels carry Qt but not the X11/xcb libraries its ``xcb`` platform plugin links against. On a
bare Debian or Ubuntu some are missing (``libxcb-icccm4`` first), and Qt then aborts with its generic
"could not load the Qt platform plugin" and no name of what is missing. ``missing()`` asks the dynamic
linker (``ldd`` on the plugin, which resolves the whole dependency tree) which libraries it cannot
find, and ``advice()`` turns them into the exact ``apt install`` line. Runs before ``QApplication``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: Every library the xcb plugin of PySide6 6.x loads that a desktop Linux may lack, with its Debian/Ubuntu
#: package (read off ``ldd`` of ``libqxcb.so`` and ``dpkg -S`` on Debian 12). installers/linux uses it too.
DEBIAN_PACKAGES = {
    "libEGL.so.1": "libegl1",
    "libGL.so.1": "libgl1",
    "libGLX.so.0": "libglx0",
    "libOpenGL.so.0": "libopengl0",
    "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3",
    "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1",
    "libxcb.so.1": "libxcb1",
    "libxcb-cursor.so.0": "libxcb-cursor0",
    "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0",
    "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0",
    "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon.so.0": "libxkbcommon0",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
}


def uses_xcb(environ: dict[str, str] | None = None) -> bool:
    """Whether Qt will try its X11 plugin: Linux, no other platform asked for, not a Wayland session."""
    env = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return False
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform:
        return platform.split(":")[0].split(";")[0] == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def xcb_plugin() -> Path | None:
    import PySide6

    path = Path(PySide6.__file__).parent / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    return path if path.exists() else None


def missing(plugin: Path | None = None) -> list[str]:
    """The shared libraries the xcb plugin needs and the dynamic linker cannot find (sonames)."""
    plugin = plugin or xcb_plugin()
    ldd = shutil.which("ldd")
    if plugin is None or ldd is None:
        return []
    try:
        out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        name, _, where = line.strip().partition(" => ")
        if where.strip() == "not found" and name not in found:
            found.append(name)
    return found


def advice(sonames: list[str]) -> str:
    """What to tell the user: the missing libraries and the ``apt install`` line that brings them."""
    packages = sorted({DEBIAN_PACKAGES[s] for s in sonames if s in DEBIAN_PACKAGES})
    lines = ["Fireside cannot open its window: Qt's X11 platform plugin needs system libraries that this "
             f"machine does not have: {', '.join(sonames)}."]
    if packages:
        lines.append(f"On Debian or Ubuntu, install them with:\n\n    sudo apt install {' '.join(packages)}\n")
    lines.append("Other distributions name them after the files above (for example xcb-util-wm and "
                 "xcb-util-keysyms on Fedora). `fireside` on the command line works without them.")
    return "\n".join(lines)
