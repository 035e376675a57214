#!/usr/bin/env bash
# Runs every benchmark behind the README's Performance section, in its
# order, each against PyTorch (or upstream MLIR) in the same run: forward
# (GPT-2-small shape, Llama-style shape, bf16; with and without the
# fusions), threads against ranks
# (tensor parallelism on 2 ranks), every GEMM shape (as a markdown table),
# the training step, the compiler at 175B and 1T, and upstream MLIR's
# sharding passes. About 20 minutes on 2 cores. Not a test: run it by hand.
#   bench/performance.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
section() { printf '\n=== %s ===\n' "$*"; }
section "Forward: GPT-2-small shape, with tensor parallelism on 2 ranks, and the fusions"
/usr/bin/python3 bench/gpt2_small.py --build "$BUILD" --tensor-parallel --fusions
section "Forward: Llama-style shape, and the fusions"
/usr/bin/python3 bench/gpt2_small.py --build "$BUILD" --model llama --fusions
section "Forward: GPT-2-small shape in bf16"
/usr/bin/python3 bench/gpt2_small.py --build "$BUILD" --dtype bf16
section "Every GEMM shape"
/usr/bin/python3 bench/gemm_table.py --build "$BUILD" --markdown
section "Training step"
/usr/bin/python3 bench/train_step.py --build "$BUILD"
section "Compiler"
bench/compile_time.sh "$BUILD"
section "Against upstream MLIR's sharding passes"
/usr/bin/python3 bench/upstream_shard.py --build "$BUILD"
