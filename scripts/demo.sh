#!/usr/bin/env bash
# The main job on a bundled model: installs what is missing, builds, imports
# the bundled GPT-2 (models/gpt2) into the mp dialect and raises it to named
# transformer ops (summary printed), compiles and runs it on one CPU rank,
# then partitions it Megatron-style (tensor parallel 2 + sequence parallel),
# runs it on 2 MPI ranks and shows both agree with each other and PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
scripts/build.sh

MODEL=models/gpt2
OUT=${MP_DEMO_DIR:-build/demo}
rm -rf "$OUT" && mkdir -p "$OUT"

echo
echo "== $MODEL/model.onnx imported and raised to named transformer ops"
build/bin/mp-opt "$MODEL/model.onnx" --mp-raise --mp-summary -o /dev/null
echo
echo "== compile to an artifact, run on CPU"
build/bin/mp-opt "$MODEL/model.onnx" --artifact "$OUT/gpt2.artifact"
build/bin/mp-run "$OUT/gpt2.artifact" --input input_ids="$MODEL/inputs/input_ids.npy" \
  --output-dir "$OUT/gpt2.out"
echo
echo "== compare with the PyTorch reference ($MODEL/outputs)"
/usr/bin/python3 test/Runtime/compare_npy.py "$OUT/gpt2.out" "$MODEL/outputs"

echo
echo "== partition: tensor parallel 2 + sequence parallel (2 all-gathers + 2 reduce-scatters per layer)"
build/bin/mp-opt "$MODEL/model.onnx" --mp-parallelize="tp=2 sp=true" --mp-summary -o /dev/null
build/bin/mp-opt "$MODEL/model.onnx" --mp-parallelize="tp=2 sp=true" --artifact "$OUT/gpt2-tp2-sp.artifact"
echo
echo "== run on 2 MPI ranks; --verify also runs the unpartitioned program"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun --oversubscribe -np 2 build/bin/mp-run "$OUT/gpt2-tp2-sp.artifact" \
  --input input_ids="$MODEL/inputs/input_ids.npy" --output-dir "$OUT/gpt2-tp2-sp.out" --verify
echo
echo "== 2-rank result vs the single-rank run, and vs PyTorch"
/usr/bin/python3 test/Runtime/compare_npy.py "$OUT/gpt2-tp2-sp.out" "$OUT/gpt2.out" --tolerance 1e-5
/usr/bin/python3 test/Runtime/compare_npy.py "$OUT/gpt2-tp2-sp.out" "$MODEL/outputs"
