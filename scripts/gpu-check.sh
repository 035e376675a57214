#!/usr/bin/env bash
# The GPU check, on a machine with a GPU: the CUDA kernel tests, every bundled
# model run on the GPU and compared with its PyTorch reference, and the GPU
# benchmark against PyTorch on the same GPU. Uses build-gpu-carry/ from
# scripts/gpu-prepare.sh (run that where the toolchain is). Prints a summary
# line; exits non-zero if anything failed. Fits in a few minutes.
set -uo pipefail
cd "$(dirname "$0")/.."

CARRY=${MP_GPU_CARRY:-build-gpu-carry}
OUT=${OUT:-/tmp/mp-gpu-check}
mkdir -p "$OUT"
if [ ! -x "$CARRY/bin/mp-run" ]; then
  echo "gpu-check: $CARRY/bin/mp-run is missing: run scripts/gpu-prepare.sh first" >&2
  exit 2
fi
if ! nvidia-smi -L; then
  echo "gpu-check: no GPU is visible here" >&2
  exit 2
fi
PY=${PYTHON:-python3}
NCCL_LIB=$($PY -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$PWD/$CARRY/lib:/usr/local/cuda/lib64:${NCCL_LIB}:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1

passed=0
failed=0
check() { # name, command...
  local name=$1
  shift
  echo
  echo "== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "gpu-check: FAILED: $name"; fi
}

check "CUDA kernels vs CPU kernels" "$CARRY/bin/mp-cuda-tests"
for m in gpt2 gpt2_untied bert llama llama_range; do
  check "$m on the GPU vs PyTorch" bash -c "
    '$CARRY/bin/mp-run' '$CARRY/artifacts/$m' --device cuda \
      --input input_ids=models/$m/inputs/input_ids.npy --output-dir '$OUT/$m' &&
    $PY test/Runtime/compare_npy.py '$OUT/$m' models/$m/outputs"
done
check "gpt2 in bf16 on the GPU vs PyTorch (fp32 reference, bf16 tolerance)" bash -c "
  '$CARRY/bin/mp-run' '$CARRY/artifacts/gpt2_bf16' --device cuda \
    --input input_ids=models/gpt2/inputs/input_ids.npy --output-dir '$OUT/gpt2_bf16' &&
  $PY test/Runtime/compare_npy.py '$OUT/gpt2_bf16' models/gpt2/outputs --tolerance 3e-2"
check "benchmark vs PyTorch" timeout 300 $PY bench/gpu_bench.py --carry "$CARRY"

echo
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
