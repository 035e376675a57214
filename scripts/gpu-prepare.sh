#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh needs on a GPU machine, which has CUDA
# and PyTorch but neither LLVM/MLIR nor the runtime's other libraries
# (protobuf, OpenBLAS): builds the runtime here with nvcc for Hopper (sm_90,
# compiler and MPI off, in build-gpu/), packs what building it there needs,
# and compiles the artifacts here. What the GPU machine needs goes to
# build-gpu-carry/ (about 52 MiB; the device tool takes at most 64 MiB with
# the working tree), to be carried there.
#
# --skip-main-build uses the compiler already built in $MP_BUILD_DIR (build/)
# instead of installing and building first (the test suite's rehearsal).
# MP_GPU_BUILD and MP_GPU_CARRY move the two folders.
set -euo pipefail
cd "$(dirname "$0")/.."

CARRY=${MP_GPU_CARRY:-build-gpu-carry}
BUILD=${MP_GPU_BUILD:-build-gpu}
MAIN=${MP_BUILD_DIR:-build}
LIMIT_MIB=60
if [ "${1:-}" = "--skip-main-build" ]; then
  [ -x "$MAIN/bin/mp-opt" ] || { echo "gpu-prepare: $MAIN/bin/mp-opt is missing: build first" >&2; exit 2; }
elif [ $# -gt 0 ]; then
  echo "usage: scripts/gpu-prepare.sh [--skip-main-build]" >&2
  exit 2
else
  scripts/bootstrap.sh
  scripts/build.sh
fi
rm -rf "$CARRY" && mkdir -p "$CARRY/bin" "$CARRY/lib" "$CARRY/artifacts"

# oneDNN off: the GPU image lacks it, and its GEMMs there are cuBLAS's.
echo "gpu-prepare: building the runtime for sm_90 (compiler, MPI and oneDNN off)..."
cmake -G Ninja -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
  -DMP_BUILD_COMPILER=OFF -DMP_ENABLE_MPI=OFF -DMP_ENABLE_CUDA=ON \
  -DMP_NATIVE_CPU=OFF -DMP_ENABLE_DNNL=OFF -DMP_CUDA_ARCHITECTURES=90 >"$BUILD.configure.log"
cmake --build "$BUILD" -j "$(nproc)" --target mp-run mp-cuda-tests mp-cuda
cp "$BUILD/bin/mp-run" "$BUILD/bin/mp-cuda-tests" "$CARRY/bin/"
strip "$CARRY/bin/"*
# The CUDA backend plugin, where mp-run looks for it (bin/../lib).
cp "$BUILD/lib/libmp-cuda.so" "$CARRY/lib/"
strip --strip-unneeded "$CARRY/lib/libmp-cuda.so"
# Libraries the GPU image lacks (CUDA's own come from the machine).
libpath() { ldconfig -p | awk -v l="$1" '$1 == l {print $NF; exit}'; }
for lib in libprotobuf.so.32 libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libgomp.so.1 libz.so.1; do
  cp -L "$(libpath "$lib")" "$CARRY/lib/"
done

# What building the runtime there needs besides the machine's compiler,
# CMake and CUDA toolkit (gpu-check.sh builds it there and falls back to the
# binaries above if that fails): the headers of protobuf, zlib,
# nlohmann_json, OpenBLAS, GoogleTest and NCCL, protoc, and GoogleTest's
# static libraries, packed small (the libraries themselves are in lib/).
echo "gpu-prepare: packing the runtime's build dependencies..."
deps=$(mktemp -d)
mkdir -p "$deps/include" "$deps/lib" "$deps/bin" "$deps/share/cmake"
cp -rL /usr/include/google /usr/include/nlohmann /usr/include/gtest \
  /usr/include/zlib.h /usr/include/zconf.h "$deps/include/"
cblas=$(grep -m1 '^MP_CBLAS_INCLUDE:' "$BUILD/CMakeCache.txt" | cut -d= -f2)
cp "$cblas/cblas.h" "$cblas/openblas_config.h" "$deps/include/"
nccl=$(grep -m1 '^MP_NCCL:' "$BUILD/CMakeCache.txt" | cut -d= -f2)
cp "$(dirname "$nccl")/../include/nccl.h" "$deps/include/"
cp -rL /usr/share/cmake/nlohmann_json "$deps/share/cmake/"
cp "$(command -v protoc)" "$deps/bin/"
cp -L "$(libpath libprotoc.so.32)" "$deps/lib/"
cp /usr/lib/x86_64-linux-gnu/libgtest.a /usr/lib/x86_64-linux-gnu/libgtest_main.a "$deps/lib/"
tar -C "$deps" -cJf "$CARRY/deps.tar.xz" .
rm -rf "$deps"

echo "gpu-prepare: compiling artifacts..."
for m in gpt2 gpt2_untied bert llama llama_range; do
  "$MAIN/bin/mp-opt" "models/$m/model.onnx" --artifact "$CARRY/artifacts/$m" >/dev/null
  "$MAIN/bin/mp-opt" "models/$m/model.onnx" --mp-parallelize="tp=1 dtype=bf16" \
    --artifact "$CARRY/artifacts/${m}_bf16" >/dev/null
  "$MAIN/bin/mp-opt" "models/$m/model.onnx" --mp-train \
    --artifact "$CARRY/artifacts/${m}_train" >/dev/null
done
"$MAIN/bin/mp-opt" models/gpt2/model.onnx --mp-parallelize="tp=1 dtype=bf16" \
  --mp-train --artifact "$CARRY/artifacts/gpt2_bf16_train" >/dev/null
# Benchmarks with synthetic weights (the real ones would not fit the carry).
tmp=$(mktemp -d)
/usr/bin/python3 models/gen_gpt3_shape.py --layers 12 --hidden 768 --heads 12 \
  --vocab 50304 --seq 128 --batch 4 -o "$tmp/gpt2_small" >/dev/null
"$MAIN/bin/mp-opt" "$tmp/gpt2_small/model.onnx" --mp-shape-only --mp-synthetic-weights \
  --artifact "$CARRY/artifacts/gpt2_small_synthetic" >/dev/null
/usr/bin/python3 models/gen_gpt3_shape.py --layers 1 --hidden 4096 --heads 32 \
  --vocab 256 --seq 2048 --batch 1 -o "$tmp/layer4096" >/dev/null
"$MAIN/bin/mp-opt" "$tmp/layer4096/model.onnx" --mp-shape-only --mp-synthetic-weights \
  --artifact "$CARRY/artifacts/layer4096_synthetic" >/dev/null
"$MAIN/bin/mp-opt" "$tmp/layer4096/model.onnx" --mp-shape-only --mp-synthetic-weights \
  --mp-parallelize="tp=1 dtype=bf16" --artifact "$CARRY/artifacts/layer4096_bf16_synthetic" >/dev/null
rm -rf "$tmp"
du -sh "$CARRY/bin" "$CARRY/lib" "$CARRY/artifacts" "$CARRY/deps.tar.xz"
size=$(du -sm "$CARRY" | cut -f1)
if [ "$size" -ge "$LIMIT_MIB" ]; then
  echo "gpu-prepare: error: $CARRY is $size MiB, over the $LIMIT_MIB MiB the GPU check may carry" >&2
  exit 1
fi
echo "gpu-prepare: done; carry $CARRY and run scripts/gpu-check.sh on the GPU machine"
