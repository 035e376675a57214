#!/usr/bin/env bash
# Fuzzing with libFuzzer under ASan and UBSan (clang-22, libclang-rt-22-dev;
# the kernels single-threaded, MP_OPENMP=OFF, so no OpenMP runtime for clang).
#
#   scripts/fuzz.sh build              configure and build the fuzz tree, make seeds
#   scripts/fuzz.sh run TARGET [SECS]  fuzz one target (default 60 s)
#   scripts/fuzz.sh all [SECS]         every target in turn (the longer run:
#                                      scripts/fuzz.sh all 3600)
#
# Targets: onnx (import, folding, raising, partitioning), program (the
# artifact loader and what it lets run), safetensors, npy. A run fails when
# the target crashes, a sanitizer reports, or it executes fewer than
# MP_FUZZ_MIN_EXECS inputs (default 10000). Crashing inputs are kept in
# $MP_FUZZ_BUILD/crashes/TARGET/; once fixed, commit each to
# fuzz/regressions/TARGET/, which the test suite replays.
#
# Environment: MP_FUZZ_BUILD (default build-fuzz), MP_BUILD_DIR (the normal
# build whose mp-opt makes the seed artifacts; default build).
# Exits 77 (ctest: skipped) when clang-22 or libFuzzer is not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
FUZZ_BUILD=${MP_FUZZ_BUILD:-build-fuzz}
MAIN_BUILD=${MP_BUILD_DIR:-build}
MIN_EXECS=${MP_FUZZ_MIN_EXECS:-10000}
TARGETS=(onnx program safetensors npy)
CLANG=${MP_FUZZ_CLANG:-clang++-22}
LIBFUZZER=/usr/lib/llvm-22/lib/clang/22/lib/linux/libclang_rt.fuzzer-x86_64.a

need_toolchain() {
  if ! command -v "$CLANG" >/dev/null || [ ! -f "$LIBFUZZER" ]; then
    echo "fuzz: skipped: $CLANG or libFuzzer ($LIBFUZZER) is not installed" \
         "(apt-get install clang-22 libclang-rt-22-dev; scripts/bootstrap.sh does)"
    exit 77
  fi
}

# Seed corpora from the bundled models: the models themselves, the zoo's,
# the key/value cache decoders, the bad ones, test/Import's If models, small single-node models of every supported op from ONNX's own
# tests, the programs and parameter files of compiled artifacts, and the
# .npy inputs and outputs.
make_seeds() {
  local seeds=$FUZZ_BUILD/seeds
  rm -rf "$seeds" && mkdir -p "$seeds"/{onnx,program,safetensors,npy}
  for m in models/*/model.onnx models/zoo/*/model.onnx \
    models/kv_cache/*/model.onnx models/newer_opsets/*/model.onnx; do
    cp "$m" "$seeds/onnx/$(basename "$(dirname "$m")").onnx"
  done
  cp models/bad/*.onnx "$seeds/onnx/"
  # If nodes on known conditions (inlined at load) and on unknown ones.
  /usr/bin/python3 test/Import/ONNX/if_models.py "$seeds/if" >/dev/null &&
    for m in "$seeds"/if/*.onnx; do mv "$m" "$seeds/onnx/if_${m##*/}"; done
  rm -rf "$seeds/if"
  local testdata=/usr/share/libonnx-testdata/data/node
  if [ -d "$testdata" ]; then
    # The supported op types, lowercase without underscores (ReduceSum ->
    # reducesum); a test's op is the longest prefix of its name, the same
    # way (test_reduce_sum_keepdims -> reducesum).
    local -A supported=()
    local op
    for op in $("$MAIN_BUILD/bin/mp-opt" --mp-list-onnx-ops | tr 'A-Z' 'a-z'); do
      supported[$op]=1
    done
    for dir in "$testdata"/test_*; do
      local name=${dir##*/test_} prefix="" word matched=""
      for word in ${name//_/ }; do
        prefix=$prefix$word
        [ -n "${supported[$prefix]:-}" ] && matched=1
      done
      [ -n "$matched" ] && cp "$dir/model.onnx" "$seeds/onnx/node_$name.onnx"
    done
  fi
  for m in gpt2 bert llama; do
    local art=$FUZZ_BUILD/artifacts/$m
    rm -rf "$art"
    "$MAIN_BUILD/bin/mp-opt" "models/$m/model.onnx" --artifact "$art" >/dev/null
    head -c -8 "$art/program.pb" >"$seeds/program/$m" # without the checksum
    cp "$art/params.safetensors" "$seeds/safetensors/$m.safetensors"
  done
  for f in models/*/inputs/*.npy models/*/outputs/*.npy; do
    cp "$f" "$seeds/npy/$(echo "$f" | tr '/' '_')"
  done
  echo "fuzz: seeds: $(for t in "${TARGETS[@]}"; do echo -n "$t $(ls "$seeds/$t" | wc -l) "; done)"
}

build() {
  need_toolchain
  if [ ! -x "$MAIN_BUILD/bin/mp-opt" ]; then
    echo "fuzz: $MAIN_BUILD/bin/mp-opt is missing: run scripts/build.sh first" >&2
    exit 1
  fi
  if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
    CC=clang-22 CXX=$CLANG cmake -G Ninja -S . -B "$FUZZ_BUILD" \
      -DCMAKE_BUILD_TYPE=Release -DMP_ENABLE_FUZZERS=ON \
      -DMP_SANITIZE=address,undefined -DMP_ENABLE_CUDA=OFF -DMP_ENABLE_MPI=OFF \
      -DMP_BUILD_TESTS=OFF -DMP_NATIVE_CPU=OFF -DMP_OPENMP=OFF \
      >"$FUZZ_BUILD.configure.log" 2>&1 || {
      cat "$FUZZ_BUILD.configure.log"
      echo "fuzz: CMake configuration failed (log above)" >&2
      exit 1
    }
  fi
  echo "fuzz: building the fuzz targets into $FUZZ_BUILD/ ($(nproc) jobs)..."
  cmake --build "$FUZZ_BUILD" -j "$(nproc)" --target \
    $(for t in "${TARGETS[@]}"; do echo "mp-fuzz-$t"; done)
  make_seeds
}

run() {
  need_toolchain
  local target=$1 seconds=${2:-60}
  local binary=$FUZZ_BUILD/bin/mp-fuzz-$target
  if [ ! -x "$binary" ]; then
    echo "fuzz: $binary is missing: run scripts/fuzz.sh build first" >&2
    exit 1
  fi
  # A fresh corpus each run: the seeds and every committed regression input.
  local corpus=$FUZZ_BUILD/corpus/$target crashes=$FUZZ_BUILD/crashes/$target
  rm -rf "$corpus" && mkdir -p "$corpus" "$crashes"
  cp "$FUZZ_BUILD/seeds/$target/"* "$corpus/"
  find "fuzz/regressions/$target" -type f -exec cp {} "$corpus/" \; 2>/dev/null || true
  local log=$FUZZ_BUILD/fuzz-$target.log
  echo "fuzz: $target for ${seconds}s ($(ls "$corpus" | wc -l) seed inputs)..."
  local status=0
  # -detect_leaks=0 as well as ASan's: the onnx target keeps one MLIR context
  # across inputs, so libFuzzer's leak heuristic (more mallocs than frees)
  # re-ran most inputs, halving the executions.
  (
    cd "$FUZZ_BUILD"
    MP_FUZZ_ARTIFACT=$PWD/artifacts/gpt2 OMP_NUM_THREADS=1 \
    ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1 \
      "bin/mp-fuzz-$target" "corpus/$target" -max_total_time="$seconds" \
        -timeout=30 -rss_limit_mb=4096 -malloc_limit_mb=2048 \
        -artifact_prefix="crashes/$target/" -print_final_stats=1 \
        -close_fd_mask=1 -detect_leaks=0
  ) >"$log" 2>&1 || status=$?
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  local found
  found=$(ls "$crashes" | wc -l)
  if [ "$status" -ne 0 ]; then
    grep -E "ERROR|runtime error|SUMMARY|Test unit written|==[0-9]+==" "$log" |
      grep -v "libprotobuf" | head -20
    echo "fuzz: $target FAILED after $execs executions (exit $status); inputs in $crashes/, log $log"
    exit 1
  fi
  echo "fuzz: $target: $execs executions in ${seconds}s, 0 crashes ($(grep -o 'cov: [0-9]*' "$log" | tail -1))"
  if [ "$execs" -lt "$MIN_EXECS" ]; then
    echo "fuzz: $target executed fewer than $MIN_EXECS inputs" >&2
    exit 1
  fi
}

case "${1:-}" in
  build) build ;;
  run) [ $# -ge 2 ] || { echo "usage: $0 run TARGET [SECONDS]" >&2; exit 2; }
       run "$2" "${3:-60}" ;;
  all) for t in "${TARGETS[@]}"; do run "$t" "${2:-60}"; done ;;
  *) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
