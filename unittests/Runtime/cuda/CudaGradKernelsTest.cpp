//===- CudaGradKernelsTest.cpp - CUDA gradient kernels against the CPU's --===//
//
// Every gradient kernel of a train step on random inputs against the CPU
// kernel (itself checked against central differences in KernelsGradTest),
// at a stated tolerance; dropout's mask and the slice gradient exactly.
// Skips, saying why, where no GPU is visible.
//
//===----------------------------------------------------------------------===//
#include "CudaTestUtil.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace mp::rt;
using namespace mp::rt::cudatest;

namespace {

/// Integer ids on both sides.
std::unique_ptr<Pair> ids(const std::vector<int64_t> &values) {
  auto p = std::make_unique<Pair>(
      DType::I64, std::vector<int64_t>{static_cast<int64_t>(values.size())});
  std::memcpy(p->h.data, values.data(), values.size() * sizeof(int64_t));
  p->upload();
  return p;
}

TEST_F(CudaKernels, LinearWeightGradMatchesCpu) {
  auto x = random({2, 5, 8}), dy = random({2, 5, 6});
  for (bool transposed : {false, true}) {
    std::vector<int64_t> shape =
        transposed ? std::vector<int64_t>{6, 8} : std::vector<int64_t>{8, 6};
    Pair dw(DType::F32, shape), ref(DType::F32, shape);
    ASSERT_TRUE(cuda::linearWeightGrad(x->d, dy->d, transposed, dw.d));
    ASSERT_TRUE(cpu::linearWeightGrad(x->h, dy->h, transposed, ref.h));
    expectNear(dw, ref.h, 1e-5);
  }
}

// 600 rows: the scale gradient sums three chunks of rows.
TEST_F(CudaKernels, NormGradsMatchCpu) {
  auto x = random({600, 40}), scale = random({40}), dy = random({600, 40});
  Pair dx(DType::F32, {600, 40}), dxRef(DType::F32, {600, 40});
  Pair ds(DType::F32, {40}), dsRef(DType::F32, {40});
  ASSERT_TRUE(cuda::layerNormGrad(x->d, scale->d, dy->d, 1, 1e-5f, dx.d, ds.d));
  ASSERT_TRUE(
      cpu::layerNormGrad(x->h, scale->h, dy->h, 1, 1e-5f, dxRef.h, dsRef.h));
  expectNear(dx, dxRef.h, 1e-4);
  expectNear(ds, dsRef.h, 1e-4);
  ASSERT_TRUE(cuda::rmsNormGrad(x->d, scale->d, dy->d, 1e-6f, dx.d, ds.d));
  ASSERT_TRUE(cpu::rmsNormGrad(x->h, scale->h, dy->h, 1e-6f, dxRef.h, dsRef.h));
  expectNear(dx, dxRef.h, 1e-4);
  expectNear(ds, dsRef.h, 1e-4);
}

TEST_F(CudaKernels, LayerNormGradOverTwoDimsMatchesCpu) {
  auto x = random({3, 4, 5}), scale = random({4, 5}), dy = random({3, 4, 5});
  Pair dx(DType::F32, {3, 4, 5}), dxRef(DType::F32, {3, 4, 5});
  Pair ds(DType::F32, {4, 5}), dsRef(DType::F32, {4, 5});
  ASSERT_TRUE(cuda::layerNormGrad(x->d, scale->d, dy->d, 1, 1e-5f, dx.d, ds.d));
  ASSERT_TRUE(
      cpu::layerNormGrad(x->h, scale->h, dy->h, 1, 1e-5f, dxRef.h, dsRef.h));
  expectNear(dx, dxRef.h, 1e-4);
  expectNear(ds, dsRef.h, 1e-4);
}

TEST_F(CudaKernels, GeluGradMatchesCpuInBothForms) {
  auto x = random({2000}, -8, 8), dy = random({2000});
  Pair dx(DType::F32, {2000}), ref(DType::F32, {2000});
  for (bool tanhForm : {false, true}) {
    ASSERT_TRUE(cuda::geluGrad(x->d, dy->d, tanhForm, dx.d));
    ASSERT_TRUE(cpu::geluGrad(x->h, dy->h, tanhForm, ref.h));
    expectNear(dx, ref.h, 1e-5);
  }
}

void expectAttentionGradMatchesCpu(CudaKernels &test, Pair &q, Pair &k, Pair &v,
                                   Pair *mask, bool causal) {
  const float scale = 0.35f;
  const Tensor *maskH = mask ? &mask->h : nullptr;
  const Tensor *maskD = mask ? &mask->d : nullptr;
  Pair out(DType::F32,
           {q.h.shape[0], q.h.shape[1], q.h.shape[2], v.h.shape[3]});
  ASSERT_TRUE(cpu::attention(q.h, k.h, v.h, maskH, scale, causal, out.h));
  out.upload();
  auto dout = test.random(out.h.shape);
  Pair dq(DType::F32, q.h.shape), dk(DType::F32, k.h.shape),
      dv(DType::F32, v.h.shape);
  Pair dqRef(DType::F32, q.h.shape), dkRef(DType::F32, k.h.shape),
      dvRef(DType::F32, v.h.shape);
  ASSERT_TRUE(cuda::attentionGrad(q.d, k.d, v.d, maskD, out.d, dout->d, scale,
                                  causal, dq.d, dk.d, dv.d));
  ASSERT_TRUE(cpu::attentionGrad(q.h, k.h, v.h, maskH, out.h, dout->h, scale,
                                 causal, dqRef.h, dkRef.h, dvRef.h));
  test.expectNear(dq, dqRef.h, 1e-4);
  test.expectNear(dk, dkRef.h, 1e-4);
  test.expectNear(dv, dvRef.h, 1e-4);
}

TEST_F(CudaKernels, CausalGroupedQueryAttentionGradMatchesCpu) {
  auto q = random({2, 4, 6, 8}), k = random({2, 2, 6, 8}),
       v = random({2, 2, 6, 5});
  expectAttentionGradMatchesCpu(*this, *q, *k, *v, nullptr, true);
}

TEST_F(CudaKernels, MaskedAttentionGradMatchesCpu) {
  auto q = random({2, 2, 5, 4}), k = random({2, 2, 7, 4}),
       v = random({2, 2, 7, 4}), mask = random({2, 1, 5, 7});
  expectAttentionGradMatchesCpu(*this, *q, *k, *v, mask.get(), false);
}

TEST_F(CudaKernels, EmbeddingGradSumsRepeatedAndVocabParallelIds) {
  auto dy = random({6, 5});
  auto positions = ids({3, 1, 3, -1, 7, 0}); // -1: row 7 of 8
  for (int64_t offset : {0, 4}) {
    Pair dt(DType::F32, {4, 5}), ref(DType::F32, {4, 5});
    ASSERT_TRUE(cuda::embeddingGrad(positions->d, dy->d, offset, 8, dt.d));
    ASSERT_TRUE(cpu::embeddingGrad(positions->h, dy->h, offset, 8, ref.h));
    expectNear(dt, ref.h, 1e-6);
  }
}

TEST_F(CudaKernels, CrossEntropyGradLeavesIgnoredTargetsOut) {
  auto logits = random({6, 11}, -4, 4), dloss = random({1});
  auto targets = ids({2, cpu::kIgnoreIndex, 10, 0, cpu::kIgnoreIndex, 5});
  Pair g(DType::F32, {6, 11}), ref(DType::F32, {6, 11});
  ASSERT_TRUE(cuda::crossEntropyGrad(logits->d, targets->d, dloss->d, g.d));
  ASSERT_TRUE(cpu::crossEntropyGrad(logits->h, targets->h, dloss->h, ref.h));
  expectNear(g, ref.h, 1e-5);
}

// Two ranks' vocabulary slices on one GPU: statistics side by side (as
// the all-gather lays them), the loss, and each slice's gradient.
TEST_F(CudaKernels, VocabParallelCrossEntropyMatchesCpu) {
  const int64_t positions = 5, slice = 6;
  auto targets = ids({1, 7, cpu::kIgnoreIndex, 11, 4});
  std::unique_ptr<Pair> logits[2] = {random({positions, slice}, -4, 4),
                                     random({positions, slice}, -4, 4)};
  Pair stats(DType::F32, {2, positions, 3}),
      statsRef(DType::F32, {2, positions, 3});
  for (int r = 0; r < 2; ++r) {
    Tensor d{
        stats.d.as<float>() + r * positions * 3, DType::F32, {1, positions, 3}};
    Tensor h{statsRef.h.as<float>() + r * positions * 3,
             DType::F32,
             {1, positions, 3}};
    ASSERT_TRUE(
        cuda::vocabParallelStats(logits[r]->d, targets->d, r * slice, d));
    ASSERT_TRUE(
        cpu::vocabParallelStats(logits[r]->h, targets->h, r * slice, h));
  }
  expectNear(stats, statsRef.h, 1e-5);
  Pair loss(DType::F32, {}), lossRef(DType::F32, {});
  Pair lse(DType::F32, {positions}), lseRef(DType::F32, {positions});
  ASSERT_TRUE(cuda::vocabParallelLoss(stats.d, targets->d, loss.d, lse.d));
  ASSERT_TRUE(
      cpu::vocabParallelLoss(statsRef.h, targets->h, lossRef.h, lseRef.h));
  expectNear(loss, lossRef.h, 1e-5);
  expectNear(lse, lseRef.h, 1e-5);
  auto dloss = random({1});
  for (int r = 0; r < 2; ++r) {
    Pair g(DType::F32, {positions, slice}), ref(DType::F32, {positions, slice});
    ASSERT_TRUE(cuda::vocabParallelCrossEntropyGrad(
        logits[r]->d, targets->d, lse.d, dloss->d, r * slice, g.d));
    ASSERT_TRUE(cpu::vocabParallelCrossEntropyGrad(
        logits[r]->h, targets->h, lseRef.h, dloss->h, r * slice, ref.h));
    expectNear(g, ref.h, 1e-5);
  }
}

TEST_F(CudaKernels, SliceGradWritesWhereTheSliceReadAndZerosElsewhere) {
  auto dy = random({2, 3});
  Pair dx(DType::F32, {5, 7}), ref(DType::F32, {5, 7});
  ASSERT_TRUE(cuda::sliceGrad(dy->d, {1, 0}, {2, 3}, dx.d));
  ASSERT_TRUE(cpu::sliceGrad(dy->h, {1, 0}, {2, 3}, ref.h));
  expectNear(dx, ref.h, 0);
}

TEST_F(CudaKernels, DropoutDrawsTheCpusMask) {
  auto x = random({5000});
  const uint64_t key = cpu::dropoutKey(42, 3, 7, 1);
  Pair out(DType::F32, {5000}), ref(DType::F32, {5000});
  ASSERT_TRUE(cuda::dropout(x->d, 0.3f, key, out.d));
  ASSERT_TRUE(cpu::dropout(x->h, 0.3f, key, ref.h));
  expectNear(out, ref.h, 0);
}

} // namespace
