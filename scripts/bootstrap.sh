#!/usr/bin/env bash
# Installs every Debian package mp needs. Idempotent; quiet when all is present.
set -euo pipefail

PACKAGES=(
  cmake ninja-build g++ pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libonnx-testdata libprotobuf-dev protobuf-compiler
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin
  nlohmann-json3-dev zlib1g-dev
  libgtest-dev googletest libbenchmark-dev
  python3-torch python3-onnx python3-numpy python3-protobuf
  clang-format clang-22 libclang-rt-22-dev
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

echo "bootstrap: installing ${#missing[@]} missing package(s): ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "bootstrap: done"
