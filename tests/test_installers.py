"""The installer build is too slow for the test run; these check, in well under a second, that the
shared PyInstaller spec and the frozen entry script still name everything that exists: every resource,
every entry point in pyproject.toml, the runner flag the engine starts runners with, the places the
engine and the app look for llama.cpp's libraries, the resources, the starter model and the build info.
"""

from __future__ import annotations

import ast
import configparser
import fnmatch
import importlib
import importlib.util
import json
import pkgutil
import shutil
import sys
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALLERS = ROOT / "installers"
SPEC = INSTALLERS / "fireside.spec"
tomllib = pytest.importorskip("tomllib")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def spec() -> dict:
    """The spec's literal top-level constants (the spec itself only runs inside PyInstaller)."""
    names = {}
    for node in ast.parse(SPEC.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return names


@pytest.fixture(scope="module")
def entry():
    return _load("fireside_installer_entry", INSTALLERS / "entry.py")


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_spec_freezes_the_packages_pyproject_installs(spec, pyproject):
    dirs = dict(pyproject["tool"]["setuptools"]["package-dir"])
    assert dirs.pop("fireside.resources") == "resources"  # data, frozen through RESOURCES below
    assert spec["PACKAGES"] == dirs
    assert spec["RESOURCES_DEST"] == "fireside/resources"  # where pip installs them too
    for folder in spec["PACKAGES"].values():
        assert (ROOT / folder / "__init__.py").is_file()
    assert (ROOT / spec["ENTRY"]).is_file()


def test_spec_names_every_resource(spec):
    files = [p.relative_to(ROOT).as_posix() for p in (ROOT / "resources").rglob("*") if p.is_file()]
    unpacked = [f for f in files if not any(fnmatch.fnmatch(f, pat) for pat in spec["RESOURCES"])]
    assert not unpacked, f"resources the installers would leave out; add them to RESOURCES in {SPEC.name}"
    for pattern in spec["RESOURCES"]:
        assert any(fnmatch.fnmatch(f, pattern) for f in files), f"{pattern} matches no file"
    assert (ROOT / spec["ICON_SOURCE"]).is_file()


def test_resources_land_where_the_app_looks(spec):
    from fireside.app import theme

    # theme.py looks two folders above itself; in the bundle it sits at fireside/app/theme.pyc.
    assert PurePosixPath(spec["RESOURCES_DEST"]) == PurePosixPath("fireside", "resources")
    rel = theme.STYLE_SHEET.relative_to(ROOT / "resources").as_posix()
    assert any(fnmatch.fnmatch(f"resources/{rel}", pat) for pat in spec["RESOURCES"])


def test_entry_script_starts_every_entry_point(spec, entry, pyproject):
    imported = {(node.module, alias.name) for node in ast.walk(ast.parse((INSTALLERS / "entry.py").read_text()))
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    targets = {**pyproject["project"]["scripts"], **pyproject["project"]["gui-scripts"]}
    for script, target in targets.items():
        module, func = target.split(":")
        assert (module, func) in imported, f"entry.py does not start {script} ({target})"
        assert module in spec["ENTRY_MODULES"]
    runner_pkg, runner_mod = spec["ENTRY_MODULES"][-1].rsplit(".", 1)
    assert (runner_pkg, runner_mod) in imported
    for module in spec["ENTRY_MODULES"]:
        assert importlib.util.find_spec(module) is not None, module


def test_frozen_runners_start_through_the_entry_script(entry, monkeypatch):
    from fireside.engine.runtime.client import runner_command

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    command = runner_command()
    assert command[0] == sys.executable
    assert entry.choose(command) == ("runner", [])


def test_frozen_template_workers_start_through_the_entry_script(entry, monkeypatch):
    from fireside.engine.prompts.renderer import worker_command

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert entry.choose(worker_command()) == ("template", [])


def test_frozen_document_readers_start_through_the_entry_script(entry, monkeypatch):
    from fireside.engine.documents.reader_process import reader_command

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert entry.choose(reader_command()) == ("reader", [])


def test_frozen_rpc_workers_start_through_the_entry_script(entry, monkeypatch):
    from fireside.engine.rpc.worker import worker_command

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert entry.choose([*worker_command(), "5000", "2", "1024"]) == ("rpc-worker", ["5000", "2", "1024"])


@pytest.mark.parametrize("argv, expected", [
    (["/usr/bin/fireside", "run", "starter", "Hi"], ("cli", ["run", "starter", "Hi"])),
    (["C:\\Fireside\\fireside.exe", "ls"], ("cli", ["ls"])),
    (["/opt/fireside/Fireside", "--cli", "hw"], ("cli", ["hw"])),
    (["/usr/bin/fireside-app"], ("app", [])),
    (["/opt/fireside/Fireside"], ("app", [])),
    (["/usr/bin/fireside", "--app"], ("app", [])),
])
def test_entry_picks_the_mode_from_name_and_flags(entry, argv, expected):
    assert entry.choose(argv) == expected


def test_llama_libraries_land_where_llama_cpp_and_hardware_look(spec):
    import llama_cpp

    from fireside.engine import ggml

    lib_dir = ggml.lib_dir()
    assert lib_dir.relative_to(Path(llama_cpp.__file__).parent.parent).as_posix() == spec["LLAMA_LIB_DEST"]
    assert any(p.name.startswith(("libllama", "llama")) for p in lib_dir.iterdir())


def test_starter_model_is_bundled_where_the_engine_finds_it(spec):
    from fireside.engine.library import starter

    assert (spec["STARTER_DIST"], spec["STARTER_FILE"]) == (starter.STARTER_DIST, starter.STARTER_FILE)


def test_bundle_build_info_reaches_hardware(spec, tmp_path, monkeypatch):
    from fireside.engine.models import hardware

    assert hardware.build_info() == {}  # a pip install names no installer backend
    (tmp_path / spec["BUILD_INFO"]).write_text(json.dumps({"backend": "vulkan"}))
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    assert hardware.build_info()["backend"] == "vulkan"


def test_build_script_offers_the_spec_backends(spec):
    build = _load("fireside_installer_build", INSTALLERS / "build.py")
    assert list(build.CMAKE_ARGS) == spec["BACKENDS"] == list(build.REGISTRY)


def test_desktop_entry_starts_the_linked_app():
    desktop = configparser.ConfigParser(interpolation=None)
    desktop.optionxform = str
    desktop.read(INSTALLERS / "linux" / "fireside.desktop")
    entry_ = desktop["Desktop Entry"]
    assert entry_["Exec"] == "/usr/bin/fireside-app" and entry_["Icon"] == "fireside"
    assert entry_["Categories"].endswith(";")
    deb_source = (INSTALLERS / "linux" / "deb.py").read_text()
    assert '"fireside-app"' in deb_source and '"fireside.png"' in deb_source


@pytest.mark.skipif(not sys.platform.startswith("linux") or not all(map(shutil.which, ["readelf", "dpkg", "ldconfig"])),
                    reason="the .deb is built on Debian or Ubuntu")
def test_deb_depends_on_every_library_the_xcb_plugin_needs(tmp_path):
    """Qt's xcb plugin in the bundle: each library it needs from the system is a Depends, even those this
    build machine lacks (named from the same table the app's own check uses)."""
    from fireside.app.systemlibs import DEBIAN_PACKAGES, xcb_plugin

    spec_ = importlib.util.spec_from_file_location("fireside_installer_deb", INSTALLERS / "linux" / "deb.py")
    deb = sys.modules["fireside_installer_deb"] = importlib.util.module_from_spec(spec_)  # its dataclass looks itself up
    spec_.loader.exec_module(deb)
    plugin = xcb_plugin()
    (tmp_path / "platforms").mkdir()
    shutil.copy(plugin, tmp_path / "platforms" / plugin.name)
    deps, _missing = deb.depends(tmp_path)
    needed = [s for s in deb._needed(plugin) if s in DEBIAN_PACKAGES]
    assert "libxcb-icccm.so.4" in needed and "libxcb-keysyms.so.1" in needed
    for soname in needed:
        assert DEBIAN_PACKAGES[soname] in deps, soname


def test_spec_freezes_what_the_engines_faces_load_on_first_use(spec):
    """A face that loads its names on first use (``_WHERE``) imports them with ``importlib``, which PyInstaller
    cannot follow: the spec names those modules as hidden imports, or the frozen app could not load a model."""
    import fireside.engine

    faces = [importlib.import_module(m.name) for m in pkgutil.iter_modules(fireside.engine.__path__, "fireside.engine.")
             if m.ispkg]
    lazy = sorted({f"{face.__name__}.{module}" for face in faces for module in getattr(face, "_WHERE", {}).values()})
    assert "fireside.engine.runtime.runtime" in lazy
    assert sorted(spec["FACE_MODULES"]) == lazy
