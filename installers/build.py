"""Builds Fireside's installer for this platform in one command.

    python installers/build.py [--backend cpu|cuda|vulkan|metal] [--reuse-installed] [--with-starter]

Steps, one log line each: (1) rebuild llama-cpp-python for the backend with its ``CMAKE_ARGS`` into
this Python environment (skipped with ``--reuse-installed``); (2) check that the installed llama.cpp
really has that backend; (3) freeze the app with ``installers/fireside.spec``; (4) package it: a
``.deb`` on Linux, a ``.dmg`` on macOS, an Inno Setup installer on Windows. Everything lands in
``installers/out/``. The build is never part of the test run; ``tests/test_installers.py`` checks only
that the spec and the entry script name what exists.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
SPEC = HERE / "fireside.spec"
# What llama-cpp-python's CMake build is told per backend. The CPU build is not tuned to the build
# machine (GGML_NATIVE=OFF): it assumes AVX2/FMA/F16C, so it runs on any x86-64 CPU since 2013.
# Every bundle carries the RPC backend (one model across paired devices, engine/rpc/): a frozen app has no
# compiler to build it at first use.
CMAKE_ARGS = {
    "cpu": "-DGGML_NATIVE=OFF -DGGML_RPC=on",
    "cuda": "-DGGML_NATIVE=OFF -DGGML_CUDA=on -DGGML_RPC=on",
    "vulkan": "-DGGML_NATIVE=OFF -DGGML_VULKAN=on -DGGML_RPC=on",
    "metal": "-DGGML_METAL=on -DGGML_RPC=on",
}
# The ggml backend registry each backend shows up as (``fireside hw`` lists them).
REGISTRY = {"cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal"}
SIZE_GOAL_MB = 250  # the CPU build, without the starter model
DESCRIPTION = """Run and chat with language models on your own machine
Fireside finds, downloads and runs GGUF language models with llama.cpp, chats with them
in a desktop app, and serves them on a local API that speaks OpenAI's, Ollama's and
Anthropic's dialects. The fireside command drives the same engine from a terminal."""


def step(n: int, text: str) -> None:
    print(f"[{n}/4] {text}", flush=True)


def reinstall_llama(backend: str) -> None:
    """Build llama-cpp-python from source for ``backend`` (about 6 minutes on 2 cores for the CPU)."""
    version = metadata.version("llama-cpp-python")
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS[backend], "FORCE_CMAKE": "1"}
    cmd = [sys.executable, "-m", "pip", "install", "--force-reinstall", "--no-deps", "--no-cache-dir",
           "--no-binary", "llama-cpp-python", f"llama-cpp-python=={version}"]
    print(f"      CMAKE_ARGS={env['CMAKE_ARGS']!r} {' '.join(cmd[2:])}", flush=True)
    subprocess.run(cmd, env=env, check=True)


def check_backend(backend: str) -> list[str]:
    """The ggml registries the installed llama.cpp has; exits if they do not match ``backend``."""
    probe = "import json; from fireside.engine.models import hardware; print(json.dumps(hardware.detect().backends))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    registries = json.loads(out.strip().splitlines()[-1])
    gpu = {REGISTRY[b] for b in ("cuda", "vulkan", "metal")} & set(registries)
    if REGISTRY[backend] not in registries or (backend == "cpu" and gpu):
        raise SystemExit(f"build: the installed llama.cpp has {registries}, not a {backend} build; "
                         "run without --reuse-installed to rebuild it")
    return registries


def freeze(backend: str, with_starter: bool) -> Path:
    cmd = [sys.executable, "-m", "PyInstaller", str(SPEC), "--noconfirm", "--log-level", "WARN",
           "--distpath", str(OUT / "dist"), "--workpath", str(OUT / "build"), "--", "--backend", backend]
    if with_starter:
        cmd.append("--with-starter")
    subprocess.run(cmd, check=True, cwd=ROOT)
    return OUT / "dist" / ("Fireside.app" if sys.platform == "darwin" else "Fireside")


def package_linux(bundle: Path, backend: str, with_starter: bool) -> Path:
    sys.path.insert(0, str(HERE))
    from icons import SOURCE, render
    from linux import deb

    icons = render(OUT / "icons")
    out_dir = OUT / f"deb-{backend}{'-starter' if with_starter else ''}"
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir(parents=True)
    result = deb.build(bundle, out_dir, version=metadata.version("fireside"), icons=icons, svg=SOURCE,
                       description=DESCRIPTION)
    print(f"      Depends: {', '.join(result.depends)}")
    for soname in result.missing:
        print(f"      not on this machine, so not in Depends (optional plugin): {soname}")
    report_size(result.installed_bytes, bundle, backend, with_starter)
    print(f"      package: {result.path} ({result.path.stat().st_size / 1e6:.1f} MB download)")
    return result.path


def report_size(installed: int, bundle: Path, backend: str, with_starter: bool) -> None:
    starter = sum(p.stat().st_size for p in bundle.rglob("*.gguf")) if with_starter else 0
    mb = installed / 1e6
    print(f"      installed size: {mb:.1f} MB" + (f" ({starter / 1e6:.1f} MB of it the starter model)" if starter else ""))
    if backend == "cpu":
        without = (installed - starter) / 1e6
        verdict = "met" if without < SIZE_GOAL_MB else "MISSED"
        print(f"      CPU build without the starter model: {without:.1f} MB; goal under {SIZE_GOAL_MB} MB: {verdict}")


def package_macos(bundle: Path, backend: str) -> Path:
    dmg = OUT / f"Fireside-{metadata.version('fireside')}-{backend}.dmg"
    subprocess.run(["bash", str(HERE / "macos" / "make_dmg.sh"), str(bundle), str(dmg)], check=True)
    print(f"      installed size: {_tree_bytes(bundle) / 1e6:.1f} MB; disk image: {dmg}")
    return dmg


def package_windows(bundle: Path, backend: str) -> Path | None:
    iscc = shutil.which("iscc") or shutil.which("ISCC")
    args = [f"/DAppVersion={metadata.version('fireside')}", f"/DBackend={backend}", f"/DSourceDir={bundle}",
            f"/O{OUT}", str(HERE / "windows" / "fireside.iss")]
    print(f"      installed size: {_tree_bytes(bundle) / 1e6:.1f} MB")
    if not iscc:
        print("      Inno Setup's iscc is not on PATH; install Inno Setup 6 and run: iscc " + " ".join(args))
        return None
    subprocess.run([iscc, *args], check=True)
    return OUT / f"Fireside-{metadata.version('fireside')}-{backend}-setup.exe"


def _tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build Fireside's installer for this platform.")
    parser.add_argument("--backend", choices=list(CMAKE_ARGS), default="cpu")
    parser.add_argument("--reuse-installed", action="store_true",
                        help="keep the llama-cpp-python already installed (it must be a build for --backend)")
    parser.add_argument("--with-starter", action="store_true", help="bundle the starter model (98 MB)")
    args = parser.parse_args(argv)
    if (args.backend == "metal") != (sys.platform == "darwin"):
        parser.error(f"the {args.backend} backend cannot be built on {sys.platform}")
    started = time.monotonic()
    if args.reuse_installed:
        step(1, f"llama-cpp-python {metadata.version('llama-cpp-python')}: reusing the installed build")
    else:
        step(1, f"rebuilding llama-cpp-python for {args.backend}")
        reinstall_llama(args.backend)
    step(2, f"llama.cpp backends: {', '.join(check_backend(args.backend))}")
    step(3, "freezing with PyInstaller (installers/fireside.spec)")
    bundle = freeze(args.backend, args.with_starter)
    step(4, f"packaging {bundle}")
    if sys.platform.startswith("linux"):
        package_linux(bundle, args.backend, args.with_starter)
    elif sys.platform == "darwin":
        package_macos(bundle, args.backend)
    elif sys.platform == "win32":
        package_windows(bundle, args.backend)
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
