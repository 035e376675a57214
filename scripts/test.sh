#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (lit + GoogleTest,
# and the clang-format check of scripts/format.sh) under one ctest, ending
# in ctest's summary.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
scripts/build.sh
BUILD_DIR=${MP_BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)"
