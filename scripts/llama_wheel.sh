#!/usr/bin/env bash
# Build (once per machine) a portable llama-cpp-python wheel and print its path.
#
# pip builds llama-cpp-python from source, and llama.cpp's default is GGML_NATIVE=ON
# (-march=native): on a CPU that advertises AMX or AVX-512 the library then uses those
# instructions and dies with "illegal instruction" on another CPU of the same machine
# kind. This build turns native tuning off and pins the x86-64-v3 baseline
# (SSE4.2, AVX, AVX2, BMI2, FMA, F16C) with AVX-512 and AMX off, so the same wheel runs
# on every x86-64 CPU from Haswell / Zen 1 on. tests/llm/test_portable_build.py checks
# the installed library for AVX-512/AMX instructions.
#
# The wheel is kept in a cache folder named after the version and these flags
# (OAM_WHEEL_CACHE, default ~/.cache/oam-site/wheels), so fresh clones on the same
# machine reuse it, and a wheel built with other flags (pip's own cache) is never taken.
#
# Usage: scripts/llama_wheel.sh PYTHON VERSION   -> prints the wheel's path on stdout.
set -euo pipefail
PYTHON=${1:?python}
VERSION=${2:?version}
ARCH=$(uname -m)
case "$ARCH" in
  x86_64|amd64)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DGGML_CCACHE=OFF" ;;
  aarch64|arm64)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8-a -DGGML_CCACHE=OFF" ;;
  *)
    FLAGS="-DGGML_NATIVE=OFF -DGGML_CCACHE=OFF" ;;
esac
KEY=$(printf '%s %s %s' "$VERSION" "$ARCH" "$FLAGS" | sha256sum | cut -c1-16)
DIR=${OAM_WHEEL_CACHE:-$HOME/.cache/oam-site/wheels}/llama-cpp-python-$VERSION-$KEY
WHEEL=$(ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n1 || true)
if [ -z "$WHEEL" ]; then
  echo "building llama-cpp-python $VERSION for a portable CPU baseline (4 to 9 min on 2 cores: docs/benchmarks.md) ..." >&2
  mkdir -p "$DIR.tmp"
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)} \
    "$PYTHON" -m pip wheel -q --no-deps --no-cache-dir --no-binary llama-cpp-python \
    -w "$DIR.tmp" "llama-cpp-python==$VERSION" >&2
  rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
  printf '%s\n' "$FLAGS" > "$DIR/CMAKE_ARGS"
  WHEEL=$(ls "$DIR"/llama_cpp_python-"$VERSION"-*.whl | head -n1)
fi
printf '%s\n' "$WHEEL"
