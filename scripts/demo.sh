#!/usr/bin/env bash
# The main job on a bundled model: installs what is missing, builds, imports
# the bundled GPT-2 (models/gpt2) into the mp dialect, raises it to named
# transformer ops, and prints the IR and a one-screen summary.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/bootstrap.sh
scripts/build.sh

MODEL=models/gpt2/model.onnx
echo
echo "== mp IR of $MODEL after import and mp-raise (parameters stay in the ONNX file)"
build/bin/mp-opt "$MODEL" --mp-raise
echo
echo "== summary"
build/bin/mp-opt "$MODEL" --mp-raise --mp-summary -o /dev/null
