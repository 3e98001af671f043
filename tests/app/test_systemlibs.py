"""On a bare Linux, ``fireside-app`` names the missing X11 libraries and the apt line, not Qt's generic abort."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from fireside.app import systemlibs

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("ldd"),
                                reason="the xcb plugin and ldd are Linux things")


def test_platform_choice_follows_qt():
    assert systemlibs.uses_xcb({"DISPLAY": ":0"})
    assert systemlibs.uses_xcb({"QT_QPA_PLATFORM": "xcb"})
    assert not systemlibs.uses_xcb({"QT_QPA_PLATFORM": "offscreen"})
    assert not systemlibs.uses_xcb({"WAYLAND_DISPLAY": "wayland-0"})


def test_a_missing_library_is_named_with_its_package(tmp_path):
    # A copy of the real plugin beside which one of its libraries is hidden: ldd reports it missing.
    plugin = systemlibs.xcb_plugin()
    assert plugin is not None
    present = [s for s in systemlibs.DEBIAN_PACKAGES if s not in systemlibs.missing(plugin)]
    assert "libxcb.so.1" in present  # sanity: the linker resolves the plugin's libraries at all
    fake = tmp_path / "libqxcb.so"
    shutil.copy(plugin, fake)
    # Rewrite one needed soname to a name no system has (same length, so the ELF stays valid).
    data = fake.read_bytes().replace(b"libxcb-xkb.so.1", b"libxcb-zzz.so.1")
    fake.write_bytes(data)
    lacking = systemlibs.missing(fake)
    assert "libxcb-zzz.so.1" in lacking
    text = systemlibs.advice(["libxcb-icccm.so.4", "libxcb-keysyms.so.1"])
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1" in text and "libxcb-icccm.so.4" in text


def test_app_prints_the_apt_line_instead_of_qts_abort(tmp_path):
    """The real entry point on this machine, with the X11 plugin's libraries hidden from the linker."""
    plugin = systemlibs.xcb_plugin()
    env = {**os.environ, "QT_QPA_PLATFORM": "xcb", "DISPLAY": ":99", "FIRESIDE_HOME": str(tmp_path / "home")}
    code = (f"import sys; from pathlib import Path; from fireside.app import systemlibs, main; "
            f"real = systemlibs.missing; systemlibs.missing = lambda p=None: real(Path({str(plugin)!r})) "
            f"+ ['libxcb-icccm.so.4']; sys.exit(main.main())")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Qt's X11 platform plugin needs system libraries" in r.stderr
    assert "sudo apt install" in r.stderr and "libxcb-icccm4" in r.stderr
    assert "could not load the Qt platform plugin" not in r.stderr
