#!/usr/bin/env bash
# Build llama-cpp-python with llama.cpp's Vulkan backend into a venv of its own (not the default
# install, not CI's required path: it takes 10-25 minutes on two cores).
#
# On Debian 12 the vendored llama.cpp needs Vulkan headers newer than bookworm's 1.3.239 (it uses
# vk::LayerSettingEXT) plus spirv-headers. Those come from Debian 13 (trixie): apt is pointed at the
# trixie suite of the mirror this machine's apt already uses, through a sources list and state folder
# of its own (the system's apt is untouched), the .debs are fetched with `apt-get download` and
# unpacked with `dpkg-deb -x` into a prefix that CMake is handed. glslc, the loader (libvulkan1) and
# Mesa's software device (mesa-vulkan-drivers: llvmpipe) come from bookworm itself.
#
# Usage: scripts/build-vulkan.sh [VENV]        (default VENV: ./.venv)
# Env:   LLAMA_CPP_PYTHON_SPEC  what pip builds (default llama-cpp-python==0.3.36)
#        VULKAN_PREFIX          where the trixie headers are unpacked (default ~/.cache/fireside-vulkan)
#        SKIP_APT=1             skip the apt steps (headers and drivers already there)
set -euo pipefail

VENV=${1:-.venv}
SPEC=${LLAMA_CPP_PYTHON_SPEC:-llama-cpp-python==0.3.36}
PREFIX=${VULKAN_PREFIX:-$HOME/.cache/fireside-vulkan}
APT_DIR=$PREFIX/apt
ROOT=$PREFIX/root

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if [ "${SKIP_APT:-0}" != 1 ]; then
    as_root apt-get install -y glslc mesa-vulkan-drivers libvulkan1 vulkan-tools
    # The mirror bookworm already uses, asked for trixie in a state folder of our own.
    mirror=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
        | grep -oE 'https?://[^ ]+' | head -n1 || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/archives/partial" "$APT_DIR/etc" "$ROOT"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror trixie main" \
        > "$APT_DIR/etc/sources.list"
    : > "$APT_DIR/status"
    apt_opts=(-o "Dir::Etc::SourceList=$APT_DIR/etc/sources.list" -o "Dir::Etc::SourceParts=-"
              -o "Dir::State=$APT_DIR" -o "Dir::State::Lists=$APT_DIR/lists"
              -o "Dir::State::status=$APT_DIR/status" -o "Dir::Cache=$APT_DIR"
              -o "Dir::Cache::Archives=$APT_DIR/archives" -o "APT::Architecture=amd64"
              -o "Debug::NoLocking=1")
    apt-get "${apt_opts[@]}" update
    (cd "$APT_DIR/archives" && apt-get "${apt_opts[@]}" download libvulkan-dev spirv-headers)
    for deb in "$APT_DIR"/archives/*.deb; do dpkg-deb -x "$deb" "$ROOT"; done
fi

test -f "$ROOT/usr/include/vulkan/vulkan.hpp" || { echo "no vulkan.hpp under $ROOT" >&2; exit 1; }
command -v glslc >/dev/null || { echo "glslc is missing (apt-get install glslc)" >&2; exit 1; }

[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
# The loader library is bookworm's (libvulkan1); only headers and the CMake hints come from trixie.
export CMAKE_ARGS="-DGGML_VULKAN=on -DVulkan_INCLUDE_DIR=$ROOT/usr/include \
-DCMAKE_PREFIX_PATH=$ROOT/usr -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so.1 \
-DCMAKE_CXX_FLAGS=-I$ROOT/usr/include"
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
nice -n 10 "$VENV/bin/pip" install --no-cache-dir --force-reinstall --no-deps --verbose "$SPEC"
"$VENV/bin/python" - <<'PY'
import llama_cpp
print("built:", llama_cpp.__file__, "gpu offload:", llama_cpp.llama_supports_gpu_offload())
PY
