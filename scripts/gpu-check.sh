#!/usr/bin/env bash
# The GPU check, on a machine with a GPU: the runtime built there, the CUDA
# kernel tests, every bundled model run on the GPU and compared with its
# PyTorch reference (fp32, and bf16 on the GPU), each model's train step and
# 10 training steps against PyTorch's, and the GPU benchmark against
# PyTorch on the same GPU.
# Uses build-gpu-carry/ from scripts/gpu-prepare.sh (run that where the
# compiler and the runtime's libraries are). Prints a summary line; exits
# non-zero if anything failed. Fits in 9 minutes and a quarter.
#
# --dry-run rehearses the whole check on a machine without a GPU: the same
# steps with --device cpu (fp32 only; the CUDA tests skip), to catch a broken
# script before it costs GPU time.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE=cuda
# The GPU machine builds the runtime on 16 cores in about a minute; a
# rehearsal on 2 (CI) needs longer.
BUILD_TIMEOUT=120
if [ "${1:-}" = "--dry-run" ]; then
  DEVICE=cpu
  BUILD_TIMEOUT=900
elif [ $# -gt 0 ]; then
  echo "usage: scripts/gpu-check.sh [--dry-run]" >&2
  exit 2
fi

CARRY=${MP_GPU_CARRY:-build-gpu-carry}
# Logs go to $OUT (the device tool brings that folder back), model outputs
# to a scratch folder.
OUT=${OUT:-/tmp/mp-gpu-check}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
if [ ! -x "$CARRY/bin/mp-run" ]; then
  echo "gpu-check: $CARRY/bin/mp-run is missing: run scripts/gpu-prepare.sh first" >&2
  exit 2
fi
CARRY=$(cd "$CARRY" && pwd)
if [ "$DEVICE" = cuda ] && ! nvidia-smi -L; then
  echo "gpu-check: no GPU is visible here (scripts/gpu-check.sh --dry-run rehearses on the CPU)" >&2
  exit 2
fi
PY=${PYTHON:-python3}
# CUDA's libraries come from the machine: its toolkit, else the nvidia-*
# Python packages PyTorch brings.
LIBS="$CARRY/lib"
SITE=$($PY -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
CUDA_DIRS="/usr/local/cuda/lib64/ /usr/local/cuda/lib/ $(for d in $SITE; do echo "$d/nvidia/"; done)"
NCCL_LIB=
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find $CUDA_DIRS -name "$lib" -print -quit 2>/dev/null)
  [ -n "$found" ] && LIBS="$LIBS:$(dirname "$found")"
  [ "$lib" = libnccl.so.2 ] && NCCL_LIB=$found
done
# Only the runtime's binaries (and its build) see these: PyTorch keeps its own.
RUNTIME_LIBS="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
# NCCL explains its own failures (a missing network interface, say) only
# when asked to.
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}

passed=0
failed=0
check() { # name, command...
  local name=$1
  shift
  echo
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); return 0; fi
  failed=$((failed + 1))
  echo "gpu-check: FAILED: $name"
  return 1
}

# Every step has a time limit, so the whole check ends within 9.2 minutes even
# if something hangs (runtime build 150 s, kernel tests 45 s, sanitizer
# 75 s, models 10 s each in fp32 and bf16 and as train steps (fp32, and
# gpt2 in bf16), 10 training steps 10 s, benchmark 110 s: 550 s in all;
# each takes a few seconds when it works).

# The runtime built here from this working tree (compiler and MPI off,
# sm_90) with this machine's compiler, CMake and CUDA toolkit, and the other
# dependencies gpu-prepare.sh packed. If that fails, the steps after it run
# the binaries gpu-prepare.sh built elsewhere, and this step counts as failed.
# The rehearsal ignores the system prefixes / and /usr, so that it proves the
# packed dependencies suffice.
# The first of these programs on the PATH or beside the Python in use (pip
# puts cmake and ninja in a virtual environment's bin/).
find_tool() {
  command -v "$1" 2>/dev/null || { [ -x "$PY_BIN/$1" ] && echo "$PY_BIN/$1"; }
}
PY_BIN=$(dirname "$(command -v "$PY")")
build_runtime() {
  local deps="$WORK/deps" build="$WORK/build" nvcc generator ncclinc cmake ninja
  local ignore=()
  [ "$DEVICE" = cpu ] && ignore=("-DCMAKE_IGNORE_PREFIX_PATH=/usr;/") # /lib is /usr/lib
  mkdir -p "$deps" && tar -C "$deps" -xJf "$CARRY/deps.tar.xz" || return 1
  cmake=$(find_tool cmake) || { echo "gpu-check: no cmake here"; return 1; }
  nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null) ||
    { echo "gpu-check: no nvcc here"; return 1; }
  [ -n "$NCCL_LIB" ] || { echo "gpu-check: no libnccl.so.2 here"; return 1; }
  generator=()
  ninja=$(find_tool ninja) && generator=(-G Ninja "-DCMAKE_MAKE_PROGRAM=$ninja")
  ncclinc=$(find /usr/local/cuda/include/ $(for d in $SITE; do echo "$d/nvidia/"; done) \
              "$deps/include/" -name nccl.h -print -quit 2>/dev/null)
  echo "$("$cmake" --version | head -1), $($nvcc --version | tail -1), nccl.h from $ncclinc"
  (
    export LD_LIBRARY_PATH="$deps/lib:$RUNTIME_LIBS"
    timeout 30 "$cmake" "${generator[@]}" -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
      -DMP_BUILD_COMPILER=OFF -DMP_ENABLE_MPI=OFF -DMP_ENABLE_CUDA=ON \
      -DMP_NATIVE_CPU=OFF -DMP_ENABLE_DNNL=OFF -DMP_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" \
      -DCMAKE_CUDA_FLAGS=-allow-unsupported-compiler \
      "${ignore[@]}" \
      -DProtobuf_INCLUDE_DIR="$deps/include" -DProtobuf_LIBRARY="$CARRY/lib/libprotobuf.so.32" \
      -DProtobuf_PROTOC_EXECUTABLE="$deps/bin/protoc" \
      -DZLIB_INCLUDE_DIR="$deps/include" -DZLIB_LIBRARY="$CARRY/lib/libz.so.1" \
      -Dnlohmann_json_DIR="$deps/share/cmake/nlohmann_json" \
      -DMP_CBLAS_INCLUDE="$deps/include" -DMP_OPENBLAS="$CARRY/lib/libopenblas.so.0" \
      -DGTEST_INCLUDE_DIR="$deps/include" -DGTEST_LIBRARY="$deps/lib/libgtest.a" \
      -DGTEST_MAIN_LIBRARY="$deps/lib/libgtest_main.a" \
      -DMP_NCCL="$NCCL_LIB" -DMP_NCCL_INCLUDE="$(dirname "$ncclinc")" \
      -DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$CARRY/lib" &&
      timeout "$BUILD_TIMEOUT" "$cmake" --build "$build" -j "$(nproc)" --target mp-run mp-cuda-tests mp-cuda
  ) >"$OUT/runtime-build.log" 2>&1
  local rc=$?
  grep -E '^(Protobuf_INCLUDE_DIR|Protobuf_LIBRARY|GTEST_LIBRARY|ZLIB_LIBRARY|MP_OPENBLAS|MP_NCCL|CMAKE_CXX_COMPILER|CMAKE_CUDA_COMPILER):' \
    "$build/CMakeCache.txt" >>"$OUT/runtime-build.log" 2>/dev/null
  tail -n $([ "$rc" -eq 0 ] && echo 12 || echo 40) "$OUT/runtime-build.log"
  [ "$rc" -eq 0 ] && [ -x "$build/bin/mp-run" ] && [ -x "$build/bin/mp-cuda-tests" ] &&
    [ -f "$build/lib/libmp-cuda.so" ] || return 1
  if missing=$(LD_LIBRARY_PATH="$RUNTIME_LIBS" ldd "$build/bin/mp-run" "$build/lib/libmp-cuda.so" | grep "not found"); then
    echo "gpu-check: the mp-run built here cannot find these libraries:" >&2
    echo "$missing" >&2
    return 1
  fi
}
BIN="$CARRY/bin"
if [ ! -f "$CARRY/deps.tar.xz" ]; then
  echo "gpu-check: $CARRY/deps.tar.xz is missing: run scripts/gpu-prepare.sh again" >&2
  exit 2
fi
if check "the runtime built here (compiler off, sm_90)" build_runtime; then
  BIN="$WORK/build/bin"
  echo "gpu-check: running the runtime built here"
else
  echo "gpu-check: running the binaries gpu-prepare.sh built instead"
fi
# (mp-run loads the CUDA backend plugin from $BIN/../lib.)
if [ ! -f "$BIN/../lib/libmp-cuda.so" ]; then
  echo "gpu-check: $BIN/../lib/libmp-cuda.so (the CUDA backend) is missing: run scripts/gpu-prepare.sh again" >&2
  exit 2
fi
if missing=$(LD_LIBRARY_PATH="$RUNTIME_LIBS" ldd "$BIN/mp-run" "$BIN/../lib/libmp-cuda.so" | grep "not found"); then
  echo "gpu-check: $BIN/mp-run cannot find these libraries here:" >&2
  echo "$missing" >&2
  exit 2
fi
# Wrappers that give the binaries their libraries (the benchmark runs one).
RUN="$WORK/run"
mkdir -p "$RUN"
for tool in mp-run mp-cuda-tests; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$RUNTIME_LIBS" "$BIN/$tool" >"$RUN/$tool"
  chmod +x "$RUN/$tool"
done

# On a GPU a skipped kernel test is a failure: it means the GPU was not used.
cuda_tests() {
  timeout 45 "$RUN/mp-cuda-tests" 2>&1 | tee "$OUT/cuda-tests.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  if [ "$DEVICE" = cuda ] && grep -q "SKIPPED \]" "$OUT/cuda-tests.log"; then
    echo "gpu-check: CUDA kernel tests were skipped on a GPU machine" >&2
    return 1
  fi
}
check "CUDA kernels vs CPU kernels" cuda_tests

# The kernel tests again under compute-sanitizer's memcheck (out-of-bounds
# and misaligned accesses, API errors), where the tool can run here. Not the
# NCCL tests: NCCL's own setup and 16-byte reads draw reports of their own.
# A run cut off by its time limit is a failure, not "could not check".
sanitized_tests() {
  local sanitizer
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null) || {
    echo "compute-sanitizer is not installed here: not counted"
    return 0
  }
  LD_LIBRARY_PATH="$RUNTIME_LIBS" timeout 75 "$sanitizer" --tool memcheck \
    "$BIN/mp-cuda-tests" --gtest_filter='-CudaNccl.*' >"$OUT/cuda-tests-memcheck.log" 2>&1
  local rc=$?
  tail -5 "$OUT/cuda-tests-memcheck.log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "gpu-check: compute-sanitizer did not finish within 75 s" >&2
    return 1
  fi
  if ! grep -q "ERROR SUMMARY" "$OUT/cuda-tests-memcheck.log" ||
     grep -q "Device not supported" "$OUT/cuda-tests-memcheck.log"; then
    echo "compute-sanitizer could not check this device: not counted"
    return 0
  fi
  grep -q "ERROR SUMMARY: 0 errors" "$OUT/cuda-tests-memcheck.log" && [ "$rc" -eq 0 ]
}
if [ "$DEVICE" = cuda ]; then
  check "CUDA kernels under compute-sanitizer memcheck" sanitized_tests
fi
# The rehearsal's CPU runs never load the CUDA backend plugin, so it is
# loaded once here: from bin/../lib, it then finds no GPU (or runs, on a
# machine that has one). On a GPU every model below loads it.
plugin_loads() {
  local said rc
  said=$(timeout 15 "$RUN/mp-run" "$CARRY/artifacts/gpt2" --device cuda --quiet \
           --input input_ids=models/gpt2/inputs/input_ids.npy 2>&1)
  rc=$?
  echo "$said"
  [ "$rc" -eq 0 ] || grep -qE "no usable GPU|no GPU is visible" <<<"$said"
}
if [ "$DEVICE" = cpu ]; then
  check "the CUDA backend plugin loads" plugin_loads
fi
for m in gpt2 gpt2_untied bert llama llama_range; do
  check "$m on $DEVICE vs PyTorch" bash -c "
    timeout 10 '$RUN/mp-run' '$CARRY/artifacts/$m' --device $DEVICE \
      --input input_ids=models/$m/inputs/input_ids.npy --output-dir '$WORK/$m' &&
    $PY test/Runtime/compare_npy.py '$WORK/$m' models/$m/outputs"
done
# Training on the device: each model's train step (loss and every
# gradient, the CUDA gradient kernels) against PyTorch's, as train.test on
# the CPU, and 10 AdamW steps of mp-run --train against PyTorch's run.
for m in gpt2 gpt2_untied bert llama llama_range; do
  check "$m train step on $DEVICE vs PyTorch" bash -c "
    timeout 10 '$RUN/mp-run' '$CARRY/artifacts/${m}_train' --device $DEVICE \
      --input input_ids=models/$m/inputs/input_ids.npy --input labels=models/$m/targets.npy \
      --output-dir '$WORK/${m}_train' --warmup 0 --iterations 1 --quiet &&
    $PY test/Runtime/compare_npy.py '$WORK/${m}_train' models/$m --names loss --tolerance 1e-5 &&
    $PY test/Runtime/compare_npy.py '$WORK/${m}_train/grads' models/$m/grads --floor 1e-2"
done
# bf16: the kernels that take f32 only run on f32 copies (Widen.cpp).
check "gpt2 bf16 train step on $DEVICE vs PyTorch (fp32 reference, bf16 tolerance)" bash -c "
  timeout 10 '$RUN/mp-run' '$CARRY/artifacts/gpt2_bf16_train' --device $DEVICE \
    --input input_ids=models/gpt2/inputs/input_ids.npy --input labels=models/gpt2/targets.npy \
    --output-dir '$WORK/gpt2_bf16_train' --warmup 0 --iterations 1 --quiet &&
  $PY test/Runtime/compare_npy.py '$WORK/gpt2_bf16_train' models/gpt2 --names loss --tolerance 3e-2 &&
  $PY test/Runtime/compare_npy.py '$WORK/gpt2_bf16_train/grads' models/gpt2/grads --tolerance 5e-2 --floor 1e-2"
check "gpt2: 10 AdamW steps on $DEVICE vs PyTorch" bash -c "
  timeout 10 '$RUN/mp-run' '$CARRY/artifacts/gpt2_train' --device $DEVICE --train \
    --data models/gpt2/train/tokens.npy --steps 10 --lr 1e-3 --betas 0.9,0.95 \
    --eps 1e-8 --weight-decay 0.1 --clip-grad 1.0 --log '$WORK/gpt2_train.jsonl' --quiet &&
  $PY test/Runtime/compare_log.py '$WORK/gpt2_train.jsonl' models/gpt2/train"
if [ "$DEVICE" = cuda ]; then
  for m in gpt2 gpt2_untied bert llama llama_range; do
    check "$m in bf16 on the GPU vs PyTorch (fp32 reference, bf16 tolerance)" bash -c "
      timeout 10 '$RUN/mp-run' '$CARRY/artifacts/${m}_bf16' --device cuda \
        --input input_ids=models/$m/inputs/input_ids.npy --output-dir '$WORK/${m}_bf16' &&
      $PY test/Runtime/compare_npy.py '$WORK/${m}_bf16' models/$m/outputs --tolerance 3e-2"
  done
  check "benchmark vs PyTorch" timeout 110 $PY bench/gpu_bench.py --carry "$CARRY" \
    --mp-run "$RUN/mp-run" --work "$WORK"
else
  check "benchmark harness on the CPU" timeout 600 $PY bench/gpu_bench.py \
    --carry "$CARRY" --mp-run "$RUN/mp-run" --work "$WORK" --device cpu --iterations 1 --warmup 0
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
