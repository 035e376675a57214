#!/usr/bin/env bash
# Benchmark: the whole compile pipeline on the GPT-3 175B shape and on a 1T
# shape (Megatron's: 128 layers, hidden 25600, 160 heads): shape-only
# import, tp=8, sp, pp (8 and 64 stages, as many micro-batches), selective
# recompute, autodiff, the memory plans and an artifact without weights;
# then inference at tp=8 with sp. Prints wall time and peak memory of each
# mp-opt run. Not a test: run it by hand.
#   bench/compile_time.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build}/bin
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
gen() { /usr/bin/python3 models/gen_gpt3_shape.py "$@" --seq 2048 --batch 1 >/dev/null; }
gen --layers 96 --hidden 12288 --heads 96 --vocab 50304 -o "$WORK/gpt3_175b"
gen --layers 128 --hidden 25600 --heads 160 --vocab 51200 -o "$WORK/gpt_1t"
for m in "gpt3_175b:tp=8 sp=true pp=8 microbatches=8 recompute=selective" \
         "gpt_1t:tp=8 sp=true pp=64 microbatches=64 recompute=selective"; do
  name=${m%%:*}
  opts=${m#*:}
  for train in --mp-train ""; do
    layout=$([ -n "$train" ] && echo "$opts" || echo "tp=8 sp=true")
    label="$name, $layout${train:+, train step}"
    /usr/bin/time -f "$label: %e s, %M KB peak memory" \
      "$BIN/mp-opt" "$WORK/$name/model.onnx" --mp-shape-only --mp-synthetic-weights \
      --mp-parallelize="$layout" $train --artifact "$WORK/$name-artifact" >/dev/null
    rm -rf "$WORK/$name-artifact"
  done
done
