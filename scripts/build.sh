#!/usr/bin/env bash
# Configures (once) and builds mp into build/ (or $MP_BUILD_DIR).
# Extra arguments go to CMake's configure step, e.g. -DMP_BUILD_COMPILER=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${MP_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >"$BUILD_DIR.configure.log" 2>&1 || {
    cat "$BUILD_DIR.configure.log"
    echo "build: CMake configuration failed (log above)" >&2
    exit 1
  }
fi
echo "build: compiling into $BUILD_DIR/ ($(nproc) jobs)..."
cmake --build "$BUILD_DIR" -j "$(nproc)"
