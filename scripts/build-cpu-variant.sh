#!/usr/bin/env bash
# Build llama-cpp-python into a separate virtual environment for one CPU instruction-set level,
# so the test suite can be run against the kernels another user's CPU would take.
#
#   scripts/build-cpu-variant.sh VENV [avx2|avx512|native] [SDIST_OR_SOURCE_DIR]
#
# VENV is created with --system-site-packages (so Fireside's other dependencies are shared) and
# gets Fireside installed editable plus the chosen llama-cpp-python build, which shadows the
# system one.  "avx2" is what an AMD EPYC Zen 2/3 or a pre-2017 Intel gives: AVX2+FMA+F16C, no
# AVX-512, no AMX -- so llama.cpp's repacked ("extra buffer type") Q4_0/Q4_K/IQ4_NL kernels are
# used instead of the AMX ones.  The build takes 10-20 minutes on 2 cores; it runs under nice.
set -euo pipefail

venv=${1:?usage: $0 VENV [avx2|avx512|native] [SDIST_OR_SOURCE_DIR]}
level=${2:-avx2}
source=${3:-llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION:-0.3.36}}
repo=$(cd "$(dirname "$0")/.." && pwd)

case "$level" in
  avx2)   flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                 -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF
                 -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  avx512) flags="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
                 -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON
                 -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF" ;;
  native) flags="-DGGML_NATIVE=ON" ;;
  *) echo "unknown level '$level' (avx2, avx512 or native)" >&2; exit 2 ;;
esac

[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/pip" install --no-deps -e "$repo"
CMAKE_ARGS="$(echo $flags)" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  nice -n 10 "$venv/bin/pip" install --no-cache-dir --no-deps --force-reinstall -v "$source"
"$venv/bin/python" - <<'PY'
import llama_cpp
print(llama_cpp.__file__)
print(llama_cpp.llama_print_system_info().decode())
PY
