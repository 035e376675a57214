//===- kernels_bench.cpp - CPU kernel benchmarks (Google Benchmark) -------===//
//
// GPT-2-small sizes: linear M=512 K=768 N=3072, attention B=4 H=12 S=128
// D=64, layerNorm (alone and after its residual add) / gelu over
// [512, 768] / [512, 3072]. Counters report
// GFLOP/s (linear, attention) and GB/s or Gelem/s for the memory-bound ones.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Kernels.h"

#include <benchmark/benchmark.h>

#include <random>

using namespace mp::rt;
using namespace mp::rt::cpu;

namespace {

struct Owned {
  std::vector<float> data;
  Tensor t;
  explicit Owned(std::vector<int64_t> shape, unsigned seed = 1) {
    t.dtype = DType::F32;
    t.shape = std::move(shape);
    data.resize(size_t(t.numel()));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1, 1);
    for (float &v : data)
      v = d(rng);
    t.data = data.data();
  }
};

void check(const Status &st, benchmark::State &state) {
  if (!st.ok)
    state.SkipWithError(st.message.c_str());
}

void BM_Linear(benchmark::State &state) {
  const int64_t M = 512, K = 768, N = 3072;
  bool transposed = state.range(0);
  Owned x({M, K}, 1),
      w(transposed ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N},
        2),
      b({N}, 3), y({M, N}, 4);
  for (auto _ : state)
    check(linear(x.t, w.t, &b.t, transposed, y.t), state);
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * M * K * N, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Linear)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_Attention(benchmark::State &state) {
  const int64_t B = 4, H = 12, S = 128, D = 64;
  bool causal = state.range(0);
  Owned q({B, H, S, D}, 1), k({B, H, S, D}, 2), v({B, H, S, D}, 3),
      o({B, H, S, D}, 4);
  for (auto _ : state)
    check(attention(q.t, k.t, v.t, nullptr, 0.125f, causal, o.t), state);
  // Two GEMMs of B*H*S*S*D multiply-adds each (causal does about half).
  state.counters["GFLOP/s"] = benchmark::Counter(
      4.0 * B * H * S * S * D, benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Attention)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_LayerNorm(benchmark::State &state) {
  const int64_t M = 512, C = 768;
  Owned x({M, C}, 1), g({C}, 2), b({C}, 3), y({M, C}, 4);
  for (auto _ : state)
    check(layerNorm(x.t, g.t, &b.t, 1, 1e-5f, y.t), state);
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * M * C * sizeof(float),
                         benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_LayerNorm)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A residual add and the layer norm that reads it: one after the other
// (fused:0) or fused (fused:1, what mp-fuse-residual-norms makes), on
// operands in cache (cold:0) or on 16 sets of them taken in turn, 96 MB
// that no cache holds (cold:1), as in a model. GB/s counts the fused
// kernel's traffic (two operands in, sum and result out).
void BM_ResidualLayerNorm(benchmark::State &state) {
  const int64_t M = 512, C = 768;
  const bool fused = state.range(0);
  const int sets = state.range(1) ? 16 : 1;
  struct Set {
    Owned a{{M, C}, 1}, b{{M, C}, 2}, sum{{M, C}, 5}, y{{M, C}, 6};
  };
  std::vector<Set> operands(static_cast<size_t>(sets));
  Owned g({C}, 3), bias({C}, 4);
  size_t next = 0;
  for (auto _ : state) {
    Set &o = operands[next++ % operands.size()];
    if (fused) {
      check(addLayerNorm(o.a.t, o.b.t, g.t, &bias.t, 1, 1e-5f, o.sum.t, o.y.t),
            state);
      continue;
    }
    check(binary(BinaryKind::Add, o.a.t, o.b.t, o.sum.t), state);
    check(layerNorm(o.sum.t, g.t, &bias.t, 1, 1e-5f, o.y.t), state);
  }
  state.counters["GB/s"] =
      benchmark::Counter(4.0 * M * C * sizeof(float),
                         benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_ResidualLayerNorm)
    ->ArgNames({"fused", "cold"})
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Unary(benchmark::State &state) {
  const int64_t M = 512, N = 3072;
  auto kind = static_cast<UnaryKind>(state.range(0));
  Owned x({M, N}, 1), y({M, N}, 2);
  for (auto _ : state)
    check(unary(kind, x.t, y.t), state);
  state.counters["Gelem/s"] = benchmark::Counter(
      double(M * N), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}
BENCHMARK(BM_Unary)
    ->ArgName("kind")
    ->Arg(int(UnaryKind::Gelu))
    ->Arg(int(UnaryKind::GeluTanh))
    ->Arg(int(UnaryKind::Tanh))
    ->Arg(int(UnaryKind::Silu))
    ->Arg(int(UnaryKind::Exp))
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_SoftmaxLastDim(benchmark::State &state) {
  const int64_t R = 4 * 12 * 128, C = 128;
  Owned x({R, C}, 1), y({R, C}, 2);
  for (auto _ : state)
    check(softmax(x.t, 1, y.t), state);
  state.counters["Gelem/s"] = benchmark::Counter(
      double(R * C), benchmark::Counter::kIsIterationInvariantRate,
      benchmark::Counter::kIs1000);
}
BENCHMARK(BM_SoftmaxLastDim)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_AddBias(benchmark::State &state) {
  const int64_t M = 512, N = 3072;
  Owned x({M, N}, 1), b({N}, 2), y({M, N}, 3);
  for (auto _ : state)
    check(binary(BinaryKind::Add, x.t, b.t, y.t), state);
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * M * N * sizeof(float),
                         benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_AddBias)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_TransposeHeads(benchmark::State &state) {
  // [B, S, H, D] -> [B, H, S, D] and the key transpose [B, H, S, D] -> [B, H,
  // D, S].
  const int64_t B = 4, S = 128, H = 12, D = 64;
  bool keys = state.range(0);
  Owned x({B, S, H, D}, 1), y({B, H, S, D}, 2);
  std::vector<int64_t> perm = keys ? std::vector<int64_t>{0, 2, 3, 1}
                                   : std::vector<int64_t>{0, 2, 1, 3};
  y.t.shape = keys ? std::vector<int64_t>{B, H, D, S}
                   : std::vector<int64_t>{B, H, S, D};
  for (auto _ : state)
    check(transpose(x.t, perm, y.t), state);
  state.counters["GB/s"] =
      benchmark::Counter(2.0 * B * S * H * D * sizeof(float),
                         benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}
BENCHMARK(BM_TransposeHeads)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

} // namespace

BENCHMARK_MAIN();
