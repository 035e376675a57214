#!/usr/bin/env bash
# The GPU check, on a machine with a GPU: the CUDA kernel tests, every bundled
# model run on the GPU and compared with its PyTorch reference, and the GPU
# benchmark against PyTorch on the same GPU. Uses build-gpu-carry/ from
# scripts/gpu-prepare.sh (run that where the toolchain is). Prints a summary
# line; exits non-zero if anything failed. Fits in a few minutes.
#
# --dry-run rehearses the whole check on a machine without a GPU: the same
# steps with --device cpu (fp32 only; the CUDA tests skip), to catch a broken
# script before it costs GPU time.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE=cuda
if [ "${1:-}" = "--dry-run" ]; then
  DEVICE=cpu
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
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
  found=$(find /usr/local/cuda/lib64/ /usr/local/cuda/lib/ $(for d in $SITE; do echo "$d/nvidia/"; done) \
            -name "$lib" -print -quit 2>/dev/null)
  [ -n "$found" ] && LIBS="$LIBS:$(dirname "$found")"
done
export LD_LIBRARY_PATH="$LIBS:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
if missing=$(ldd "$CARRY/bin/mp-run" | grep "not found"); then
  echo "gpu-check: mp-run cannot find these libraries here:" >&2
  echo "$missing" >&2
  exit 2
fi

passed=0
failed=0
check() { # name, command...
  local name=$1
  shift
  echo
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "gpu-check: FAILED: $name"; fi
}

# Every step has a time limit, so the whole check ends within 8 minutes even
# if something hangs (kernel tests 60 s, sanitizer 90 s, models 20 s each,
# benchmark 180 s: 450 s in all).
# On a GPU a skipped kernel test is a failure: it means the GPU was not used.
cuda_tests() {
  timeout 60 "$CARRY/bin/mp-cuda-tests" 2>&1 | tee "$OUT/cuda-tests.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || return 1
  if [ "$DEVICE" = cuda ] && grep -q "SKIPPED \]" "$OUT/cuda-tests.log"; then
    echo "gpu-check: CUDA kernel tests were skipped on a GPU machine" >&2
    return 1
  fi
}
check "CUDA kernels vs CPU kernels" cuda_tests

# The kernel tests again under compute-sanitizer's memcheck (out-of-bounds
# and misaligned accesses, API errors), where the tool can run here.
sanitized_tests() {
  if ! command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer is not installed here: not counted"
    return 0
  fi
  timeout 90 compute-sanitizer --tool memcheck "$CARRY/bin/mp-cuda-tests" \
    >"$OUT/cuda-tests-memcheck.log" 2>&1
  local rc=$?
  tail -5 "$OUT/cuda-tests-memcheck.log"
  if ! grep -q "ERROR SUMMARY" "$OUT/cuda-tests-memcheck.log"; then
    echo "compute-sanitizer could not check this device: not counted"
    return 0
  fi
  grep -q "ERROR SUMMARY: 0 errors" "$OUT/cuda-tests-memcheck.log" && [ "$rc" -eq 0 ]
}
if [ "$DEVICE" = cuda ]; then
  check "CUDA kernels under compute-sanitizer memcheck" sanitized_tests
fi
for m in gpt2 gpt2_untied bert llama llama_range; do
  check "$m on $DEVICE vs PyTorch" bash -c "
    timeout 20 '$CARRY/bin/mp-run' '$CARRY/artifacts/$m' --device $DEVICE \
      --input input_ids=models/$m/inputs/input_ids.npy --output-dir '$WORK/$m' &&
    $PY test/Runtime/compare_npy.py '$WORK/$m' models/$m/outputs"
done
if [ "$DEVICE" = cuda ]; then
  check "gpt2 in bf16 on the GPU vs PyTorch (fp32 reference, bf16 tolerance)" bash -c "
    timeout 20 '$CARRY/bin/mp-run' '$CARRY/artifacts/gpt2_bf16' --device cuda \
      --input input_ids=models/gpt2/inputs/input_ids.npy --output-dir '$WORK/gpt2_bf16' &&
    $PY test/Runtime/compare_npy.py '$WORK/gpt2_bf16' models/gpt2/outputs --tolerance 3e-2"
  check "benchmark vs PyTorch" timeout 180 $PY bench/gpu_bench.py --carry "$CARRY" --work "$WORK"
else
  check "benchmark harness on the CPU" timeout 600 $PY bench/gpu_bench.py \
    --carry "$CARRY" --work "$WORK" --device cpu --iterations 1 --warmup 0
fi

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
