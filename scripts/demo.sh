#!/usr/bin/env bash
# The main job on a bundled model: installs what is missing, builds, imports
# the bundled GPT-2 (models/gpt2) into the mp dialect and raises it to named
# transformer ops (IR and summary printed), compiles it to an artifact, runs
# it with mp-run on CPU and shows that it matches the PyTorch reference.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
scripts/build.sh

MODEL=models/gpt2
OUT=${MP_DEMO_DIR:-build/demo}
rm -rf "$OUT" && mkdir -p "$OUT"

echo
echo "== mp IR of $MODEL/model.onnx after import and mp-raise (parameters stay in the ONNX file)"
build/bin/mp-opt "$MODEL/model.onnx" --mp-raise
echo
echo "== summary"
build/bin/mp-opt "$MODEL/model.onnx" --mp-raise --mp-summary -o /dev/null
echo
echo "== compile to an artifact, run on CPU"
build/bin/mp-opt "$MODEL/model.onnx" --artifact "$OUT/gpt2.artifact"
build/bin/mp-run "$OUT/gpt2.artifact" --input input_ids="$MODEL/inputs/input_ids.npy" \
  --output-dir "$OUT/gpt2.out"
echo
echo "== compare with the PyTorch reference ($MODEL/outputs)"
/usr/bin/python3 test/Runtime/compare_npy.py "$OUT/gpt2.out" "$MODEL/outputs"
