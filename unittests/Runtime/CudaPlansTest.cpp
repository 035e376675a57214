//===- CudaPlansTest.cpp - the CUDA backend's plans, run on the CPU -------===//
//
// The cuBLAS calls the CUDA backend makes for matmuls and attention, and its
// attention chunks and masking, executed here by a host model of
// cublasGemmStridedBatchedEx (column-major, exactly as documented) and the
// softmax the masked-softmax kernel computes, and compared with the CPU
// kernels. This checks every index, stride and leading dimension the GPU
// would get, without a GPU.
//
//===----------------------------------------------------------------------===//
#include "Plans.h"

#include "mp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <random>

using namespace mp::rt;
using namespace mp::rt::cuda;

namespace {

/// cublasGemmStridedBatchedEx(transa = c.transFirst, transb =
/// c.transSecond, beta = c.accumulate) on host memory: C[i + j*ldc] =
/// alpha · sum_l opA(i, l) · opB(l, j) (+ C), per batch.
void hostCublas(const ColumnMajorGemm &c, float alpha, const float *first,
                const float *second, float *out) {
  for (int64_t p = 0; p < c.batch; ++p) {
    const float *A = first + c.offsetFirst + p * c.strideFirst;
    const float *B = second + c.offsetSecond + p * c.strideSecond;
    float *C = out + c.offsetC + p * c.strideC;
    for (int64_t j = 0; j < c.n; ++j)
      for (int64_t i = 0; i < c.m; ++i) {
        double acc = 0;
        for (int64_t l = 0; l < c.k; ++l) {
          float a = c.transFirst ? A[l + i * c.ldFirst] : A[i + l * c.ldFirst];
          float b =
              c.transSecond ? B[j + l * c.ldSecond] : B[l + j * c.ldSecond];
          acc += double(a) * b;
        }
        float &dst = C[i + j * c.ldC];
        dst = static_cast<float>(alpha * acc + (c.accumulate ? dst : 0.0f));
      }
  }
}

/// What the CUDA backend's gemm() asks cuBLAS for.
void runPlan(const RowMajorGemm &g, const float *a, const float *b, float *c,
             float alpha = 1.0f) {
  hostCublas(columnMajor(g), alpha, b, a, c);
}

struct Host {
  std::vector<float> data;
  Tensor t;
  explicit Host(std::vector<int64_t> shape) {
    t = Tensor{nullptr, DType::F32, shape};
    data.assign(t.numel(), 0.0f);
    t.data = data.data();
  }
};

class CudaPlans : public ::testing::Test {
public:
  Host random(std::vector<int64_t> shape) {
    Host h(std::move(shape));
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float &x : h.data)
      x = dist(rng);
    return h;
  }
  static void expectNear(const Host &got, const Host &want, double tol) {
    ASSERT_EQ(got.data.size(), want.data.size());
    for (size_t i = 0; i < want.data.size(); ++i)
      ASSERT_NEAR(got.data[i], want.data[i], tol) << "element " << i;
  }
  std::mt19937 rng{11};
};

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

void expectMatmulPlanMatchesCpu(Host &a, Host &b, std::vector<int64_t> outShape,
                                size_t expectedCalls) {
  std::string error;
  std::vector<RowMajorGemm> plan = matmulPlan(a.t.shape, b.t.shape, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(plan.size(), expectedCalls);
  Host got(outShape), want(outShape);
  for (const RowMajorGemm &g : plan)
    runPlan(g, a.data.data(), b.data.data(), got.data.data());
  ASSERT_TRUE(cpu::matmul(a.t, b.t, want.t));
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], 1e-5) << "element " << i;
}

TEST_F(CudaPlans, MatmulWithSharedRightOperandIsOneTallGemm) {
  Host a = random({2, 3, 4, 5}), b = random({5, 6});
  expectMatmulPlanMatchesCpu(a, b, {2, 3, 4, 6}, 1);
}

TEST_F(CudaPlans, MatmulBatchedAndBroadcastLeftAreStridedBatched) {
  Host a = random({2, 3, 4, 5}), b = random({2, 3, 5, 6});
  expectMatmulPlanMatchesCpu(a, b, {2, 3, 4, 6}, 1);
  Host a1 = random({4, 5}), b1 = random({3, 5, 2});
  expectMatmulPlanMatchesCpu(a1, b1, {3, 4, 2}, 1);
}

TEST_F(CudaPlans, MatmulBroadcastOnBothSidesIsOneGemmPerBatch) {
  Host a = random({2, 1, 4, 5}), b = random({1, 3, 5, 6});
  expectMatmulPlanMatchesCpu(a, b, {2, 3, 4, 6}, 6);
}

TEST_F(CudaPlans, MatmulOfVectors) {
  Host a = random({5}), b = random({5, 3});
  expectMatmulPlanMatchesCpu(a, b, {3}, 1);
  Host m = random({2, 4, 5}), v = random({5});
  expectMatmulPlanMatchesCpu(m, v, {2, 4}, 1);
}

TEST_F(CudaPlans, MatmulRejectsShapesThatDoNotFit) {
  std::string error;
  EXPECT_TRUE(matmulPlan({2, 3}, {4, 5}, error).empty());
  EXPECT_NE(error.find("inner dimensions of 2x3 and 4x5"), std::string::npos)
      << error;
  error.clear();
  EXPECT_TRUE(matmulPlan({2, 3, 4}, {3, 4, 5}, error).empty());
  EXPECT_NE(error.find("do not broadcast"), std::string::npos) << error;
}

/// Runs what the integer GEMM kernel computes, element by element, for a
/// matmul of int32 operands and compares it with cpu::matmul exactly.
void expectIntegerMatmulMatchesCpu(std::vector<int64_t> aShape,
                                   std::vector<int64_t> bShape,
                                   std::vector<int64_t> outShape,
                                   std::mt19937 &rng) {
  auto make = [&](std::vector<int64_t> shape, std::vector<int32_t> &data) {
    Tensor t{nullptr, DType::I32, std::move(shape)};
    data.resize(size_t(t.numel()));
    std::uniform_int_distribution<int32_t> dist(
        std::numeric_limits<int32_t>::min(),
        std::numeric_limits<int32_t>::max());
    for (int32_t &x : data) // large values: products and sums wrap
      x = dist(rng);
    t.data = data.data();
    return t;
  };
  std::vector<int32_t> aData, bData, got, want;
  Tensor a = make(aShape, aData), b = make(bShape, bData);
  Tensor wantT = make(outShape, want);
  got.assign(want.size(), 0);
  std::string error;
  for (const RowMajorGemm &g : matmulPlan(aShape, bShape, error))
    for (int64_t p = 0; p < g.batch; ++p)
      for (int64_t i = 0; i < g.m; ++i)
        for (int64_t j = 0; j < g.n; ++j)
          got[size_t(gemmOffsetC(g, p, i, j))] =
              integerGemmElement(g, aData.data(), bData.data(), p, i, j);
  ASSERT_EQ(error, "");
  ASSERT_TRUE(cpu::matmul(a, b, wantT));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], want[i]) << "element " << i;
}

TEST_F(CudaPlans, IntegerMatmulWrapsAsOnTheCpu) {
  expectIntegerMatmulMatchesCpu({2, 3, 4}, {4, 5}, {2, 3, 5}, rng);
  expectIntegerMatmulMatchesCpu({2, 1, 3, 4}, {1, 2, 4, 2}, {2, 2, 3, 2}, rng);
  expectIntegerMatmulMatchesCpu({4}, {3, 4, 2}, {3, 2}, rng);
}

TEST_F(CudaPlans, LinearWithTransposedWeight) {
  Host x = random({3, 4, 8}), w = random({6, 8}), got({3, 4, 6}),
       want({3, 4, 6});
  RowMajorGemm g;
  g.m = 12;
  g.n = 6;
  g.k = 8;
  g.transB = true;
  runPlan(g, x.data.data(), w.data.data(), got.data.data());
  ASSERT_TRUE(cpu::linear(x.t, w.t, nullptr, true, want.t));
  expectNear(got, want, 1e-5);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// attentionSoftmaxKernel on a chunk's scores, one row at a time, in place.
void hostAttentionSoftmax(const AttentionShape &s, const AttentionChunk &c,
                          const Host *mask, bool causal, float *scores) {
  const std::vector<int64_t> full = {s.batch, s.heads, s.queries, s.keys};
  const Dims maskDims = dimsOf(full);
  const Strides maskStrides =
      mask ? broadcastStrides(full, mask->t.shape) : Strides();
  for (int64_t r = 0; r < c.pairs * c.rows; ++r) {
    const int64_t row = c.rowBase(s) + r, i = row % s.queries;
    float *p = scores + r * s.keys;
    std::vector<float> logit(s.keys);
    float m = -std::numeric_limits<float>::max(), sum = 0;
    for (int64_t j = 0; j < s.keys; ++j) {
      logit[j] =
          keyVisible(i, j, s.queries, s.keys, causal)
              ? p[j] + (mask ? mask->data[offsetOf(row * s.keys + j, maskDims,
                                                   maskStrides)]
                             : 0.0f)
              : -INFINITY;
      m = std::max(m, logit[j]);
    }
    for (int64_t j = 0; j < s.keys; ++j)
      sum += std::exp(logit[j] - m);
    for (int64_t j = 0; j < s.keys; ++j)
      p[j] = sum > 0 ? std::exp(logit[j] - m) / sum : 0.0f;
  }
}

/// The CUDA attention's host side and kernel, step by step, on the CPU.
Host planAttention(const Host &q, const Host &k, const Host &v,
                   const Host *mask, float scale, bool causal,
                   int64_t budgetBytes, size_t *chunkCount = nullptr) {
  const AttentionShape s{q.t.shape[0], q.t.shape[1], k.t.shape[1], q.t.shape[2],
                         k.t.shape[2], q.t.shape[3], v.t.shape[3]};
  Host out({s.batch, s.heads, s.queries, s.valueDim});
  std::vector<AttentionChunk> chunks = attentionChunks(s, 4, budgetBytes);
  if (chunkCount)
    *chunkCount = chunks.size();
  for (const AttentionChunk &c : chunks) {
    const int64_t rows = c.pairs * c.rows;
    EXPECT_LE(rows * s.keys * 4, std::max<int64_t>(budgetBytes, s.keys * 4));
    std::vector<float> scores(rows * s.keys, std::nanf(""));
    runPlan(attentionScoresGemm(s, c), q.data.data(), k.data.data(),
            scores.data(), scale);
    hostAttentionSoftmax(s, c, mask, causal, scores.data());
    runPlan(attentionValuesGemm(s, c), scores.data(), v.data.data(),
            out.data.data());
  }
  return out;
}

struct AttentionGrads {
  Host dq, dk, dv;
};

/// The CUDA attention backward's host side and kernels (cuda::attentionGrad),
/// step by step, on the CPU: per chunk, P recomputed as the forward, then
/// the GEMMs of attentionGradGemms around attentionScoreGradKernel.
AttentionGrads planAttentionGrad(const Host &q, const Host &k, const Host &v,
                                 const Host *mask, const Host &out,
                                 const Host &dout, float scale, bool causal,
                                 int64_t budgetBytes) {
  const AttentionShape s{q.t.shape[0], q.t.shape[1], k.t.shape[1], q.t.shape[2],
                         k.t.shape[2], q.t.shape[3], v.t.shape[3]};
  AttentionGrads g{Host(q.t.shape), Host(k.t.shape), Host(v.t.shape)};
  for (const AttentionChunk &c :
       attentionChunks(s, kAttentionGradBytesPerScore, budgetBytes)) {
    const int64_t rows = c.pairs * c.rows;
    std::vector<float> probs(rows * s.keys, std::nanf("")),
        dprobs(rows * s.keys, std::nanf(""));
    runPlan(attentionScoresGemm(s, c), q.data.data(), k.data.data(),
            probs.data(), scale);
    hostAttentionSoftmax(s, c, mask, causal, probs.data());
    const AttentionGradGemms plan = attentionGradGemms(s, c);
    runPlan(plan.valueGrad, probs.data(), dout.data.data(), g.dv.data.data());
    runPlan(plan.probabilityGrad, dout.data.data(), v.data.data(),
            dprobs.data());
    for (int64_t r = 0; r < rows; ++r) { // attentionScoreGradKernel
      const int64_t row = c.rowBase(s) + r;
      float dot = 0;
      for (int64_t d = 0; d < s.valueDim; ++d)
        dot += dout.data[row * s.valueDim + d] * out.data[row * s.valueDim + d];
      for (int64_t j = 0; j < s.keys; ++j)
        dprobs[r * s.keys + j] =
            probs[r * s.keys + j] * (dprobs[r * s.keys + j] - dot);
    }
    runPlan(plan.queryGrad, dprobs.data(), k.data.data(), g.dq.data.data(),
            scale);
    runPlan(plan.keyGrad, dprobs.data(), q.data.data(), g.dk.data.data(),
            scale);
  }
  return g;
}

struct AttentionCase {
  std::vector<int64_t> q, k, v, mask;
  bool causal;
  int64_t budget;
  size_t chunks;
};

void PrintTo(const AttentionCase &c, std::ostream *os) {
  auto shape = [&](const std::vector<int64_t> &v) {
    *os << "[";
    for (size_t i = 0; i < v.size(); ++i)
      *os << (i ? "," : "") << v[i];
    *os << "]";
  };
  *os << "q";
  shape(c.q);
  *os << " k";
  shape(c.k);
  *os << " v";
  shape(c.v);
  *os << " mask";
  shape(c.mask);
  *os << (c.causal ? " causal" : "") << " budget " << c.budget;
}

void expectAttentionPlanMatchesCpu(CudaPlans &test, const AttentionCase &c,
                                   Host &q, Host &k, Host &v) {
  Host mask = test.random(c.mask.empty() ? std::vector<int64_t>{1} : c.mask);
  const Host *m = c.mask.empty() ? nullptr : &mask;
  size_t chunks = 0;
  Host got = planAttention(q, k, v, m, 0.3f, c.causal, c.budget, &chunks);
  Host want({q.t.shape[0], q.t.shape[1], q.t.shape[2], v.t.shape[3]});
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, m ? &m->t : nullptr, 0.3f, c.causal,
                             want.t));
  EXPECT_EQ(chunks, c.chunks);
  for (size_t i = 0; i < want.data.size(); ++i)
    ASSERT_NEAR(got.data[i], want.data[i], 1e-5) << "element " << i;
}

} // namespace

class CudaAttentionPlans : public CudaPlans,
                           public ::testing::WithParamInterface<AttentionCase> {
};

TEST_P(CudaAttentionPlans, MatchesCpuAttention) {
  const AttentionCase &c = GetParam();
  Host q = random(c.q), k = random(c.k), v = random(c.v);
  expectAttentionPlanMatchesCpu(*this, c, q, k, v);
}

// The backward's chunks hold P and dP (8 bytes a score): the same budgets
// cut them twice as fine, so dK and dV accumulate over chunks.
TEST_P(CudaAttentionPlans, GradientMatchesCpuAttentionGrad) {
  const AttentionCase &c = GetParam();
  Host q = random(c.q), k = random(c.k), v = random(c.v);
  Host mask = random(c.mask.empty() ? std::vector<int64_t>{1} : c.mask);
  const Host *m = c.mask.empty() ? nullptr : &mask;
  Host out({q.t.shape[0], q.t.shape[1], q.t.shape[2], v.t.shape[3]});
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, m ? &m->t : nullptr, 0.3f, c.causal,
                             out.t));
  Host dout = random(out.t.shape);
  AttentionGrads got =
      planAttentionGrad(q, k, v, m, out, dout, 0.3f, c.causal, c.budget);
  AttentionGrads want{Host(q.t.shape), Host(k.t.shape), Host(v.t.shape)};
  ASSERT_TRUE(cpu::attentionGrad(q.t, k.t, v.t, m ? &m->t : nullptr, out.t,
                                 dout.t, 0.3f, c.causal, want.dq.t, want.dk.t,
                                 want.dv.t));
  expectNear(got.dq, want.dq, 1e-5);
  expectNear(got.dk, want.dk, 1e-5);
  expectNear(got.dv, want.dv, 1e-5);
}

// Budgets in bytes of fp32 scores: everything at once, a few (batch, kv
// head) pairs per chunk, and rows of one pair per chunk.
INSTANTIATE_TEST_SUITE_P(
    Layouts, CudaAttentionPlans,
    ::testing::Values(
        // Multi-head, causal, all in one chunk.
        AttentionCase{
            {2, 3, 5, 4}, {2, 3, 5, 4}, {2, 3, 5, 6}, {}, true, 1 << 20, 1},
        // Grouped query heads (4 over 2), two pairs per chunk.
        AttentionCase{{2, 4, 3, 8},
                      {2, 2, 3, 8},
                      {2, 2, 3, 8},
                      {},
                      true,
                      2 * 2 * 3 * 3 * 4,
                      2},
        // A decode step: 2 queries see a 7-key cache, causal, mask per key.
        AttentionCase{{1, 2, 2, 4},
                      {1, 2, 7, 4},
                      {1, 2, 7, 4},
                      {1, 1, 1, 7},
                      true,
                      1 << 20,
                      1},
        // A full [B,1,Sq,Sk] mask, not causal, rows of one pair per chunk
        // (3 rows of 4 keys a chunk: 2 chunks per pair).
        AttentionCase{{2, 1, 5, 4},
                      {2, 1, 4, 4},
                      {2, 1, 4, 3},
                      {2, 1, 5, 4},
                      false,
                      3 * 4 * 4,
                      4},
        // Grouped heads with the group's rows split across chunks.
        AttentionCase{
            {1, 6, 4, 2}, {1, 2, 4, 2}, {1, 2, 4, 2}, {}, true, 5 * 4 * 4, 6}));

TEST_F(CudaPlans, LinearWeightGradIsOneGemmOverEveryPosition) {
  Host x = random({2, 5, 8}), dy = random({2, 5, 6});
  for (bool transposed : {false, true}) {
    std::vector<int64_t> shape =
        transposed ? std::vector<int64_t>{6, 8} : std::vector<int64_t>{8, 6};
    Host got(shape), want(shape);
    RowMajorGemm g = linearWeightGradGemm(10, 8, 6, transposed);
    if (transposed)
      runPlan(g, dy.data.data(), x.data.data(), got.data.data());
    else
      runPlan(g, x.data.data(), dy.data.data(), got.data.data());
    ASSERT_TRUE(cpu::linearWeightGrad(x.t, dy.t, transposed, want.t));
    expectNear(got, want, 1e-5);
  }
}

TEST_F(CudaPlans, AttentionRowsThatSeeNoKeyAreZero) {
  // More queries than keys under causality: the first rows see nothing.
  Host q = random({1, 1, 4, 2}), k = random({1, 1, 2, 2}),
       v = random({1, 1, 2, 3});
  Host got = planAttention(q, k, v, nullptr, 1.0f, true, 1 << 20);
  Host want({1, 1, 4, 3});
  ASSERT_TRUE(cpu::attention(q.t, k.t, v.t, nullptr, 1.0f, true, want.t));
  expectNear(got, want, 1e-6);
  for (int j = 0; j < 3; ++j)
    EXPECT_EQ(got.data[j], 0.0f);
}

TEST_F(CudaPlans, AttentionChunksCoverEveryRowOnce) {
  AttentionShape s{3, 8, 2, 5, 9, 4, 4};
  for (int64_t budget : {int64_t(1), int64_t(9 * 4 * 7), int64_t(1) << 30}) {
    std::vector<int> seen(s.pairs() * s.rowsPerPair(), 0);
    for (const AttentionChunk &c : attentionChunks(s, 4, budget))
      for (int64_t r = 0; r < c.pairs * c.rows; ++r)
        ++seen[c.rowBase(s) + r];
    for (int n : seen)
      ASSERT_EQ(n, 1) << "budget " << budget;
  }
}

TEST_F(CudaPlans, AttentionScratchIsTheLargestChunkWithinTheBudget) {
  AttentionShape s{3, 8, 2, 5, 9, 4, 4};
  const int64_t perScore = attentionBytesPerScore(2, /*fp32=*/false);
  EXPECT_EQ(perScore, 6); // fp32 logit + bf16 probability
  EXPECT_EQ(attentionBytesPerScore(4, /*fp32=*/true), 4);
  const int64_t all = s.pairs() * s.rowsPerPair() * s.keys * perScore;
  EXPECT_EQ(attentionScratchBytes(s, perScore, int64_t(1) << 30), all);
  // Two pairs per chunk; then rows of one pair; then one row (at least).
  const int64_t pair = s.rowsPerPair() * s.keys * perScore;
  EXPECT_EQ(attentionScratchBytes(s, perScore, 2 * pair + 1), 2 * pair);
  EXPECT_EQ(attentionScratchBytes(s, perScore, 3 * s.keys * perScore),
            3 * s.keys * perScore);
  EXPECT_EQ(attentionScratchBytes(s, perScore, 1), s.keys * perScore);
  EXPECT_EQ(attentionScratchBytes(AttentionShape{0, 8, 2, 5, 9, 4, 4}, perScore,
                                  1 << 20),
            0);
}

TEST_F(CudaPlans, CoalescingKeepsEveryOffset) {
  struct Case {
    std::vector<int64_t> out, a, b;
    int rank; // after coalescing
  };
  for (const Case &c : {Case{{4, 3, 5}, {4, 3, 5}, {4, 3, 5}, 1},
                        Case{{4, 3, 5}, {4, 3, 5}, {5}, 2},
                        Case{{2, 1, 3, 4}, {2, 1, 3, 4}, {2, 1, 1, 4}, 3},
                        Case{{2, 3, 4, 5}, {1, 3, 4, 1}, {2, 3, 4, 5}, 3},
                        Case{{1, 1}, {1}, {1, 1}, 0}}) {
    Dims dims = dimsOf(c.out), merged = dims;
    Strides sa = broadcastStrides(c.out, c.a),
            sb = broadcastStrides(c.out, c.b);
    Strides ma = sa, mb = sb;
    coalesce(merged, {&ma, &mb});
    EXPECT_EQ(merged.rank, c.rank);
    int64_t n = 1;
    for (int64_t d : c.out)
      n *= d;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(offsetOf(i, merged, ma), offsetOf(i, dims, sa)) << i;
      ASSERT_EQ(offsetOf(i, merged, mb), offsetOf(i, dims, sb)) << i;
    }
  }
  // A transpose's two views: only the dims that stay together merge.
  std::vector<int64_t> shape = {2, 3, 4, 5};
  Dims dims = dimsOf({2, 4, 5, 3}), merged = dims; // x.transpose(0, 2, 3, 1)
  Strides in, out;
  in.s[0] = 60, in.s[1] = 5, in.s[2] = 1, in.s[3] = 20;
  out.s[0] = 60, out.s[1] = 15, out.s[2] = 3, out.s[3] = 1;
  Strides mi = in, mo = out;
  coalesce(merged, {&mi, &mo});
  EXPECT_EQ(merged.rank, 3);
  for (int64_t i = 0; i < 120; ++i) {
    ASSERT_EQ(offsetOf(i, merged, mi), offsetOf(i, dims, in)) << i;
    ASSERT_EQ(offsetOf(i, merged, mo), offsetOf(i, dims, out)) << i;
  }
}

/// Row-major offsets computed the plain way, for offsetOf to match.
static int64_t referenceOffset(int64_t index, const std::vector<int64_t> &shape,
                               const std::vector<int64_t> &strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    off += (index % shape[d]) * strides[d];
    index /= shape[d];
  }
  return off;
}

TEST(CudaPlanIndexing, OffsetsMatchThePlainArithmeticBeyondThirtyTwoBits) {
  const int64_t big = int64_t(1) << 33;
  struct Case {
    std::vector<int64_t> shape, strides;
    std::vector<int64_t> indices;
  };
  for (const Case &c :
       {Case{{}, {}, {0}}, Case{{7}, {3}, {0, 6}},
        Case{{2, 3, 4, 5, 6, 7, 2, 3},
             {1, 2, 3, 4, 5, 6, 7, 8},
             {0, 1, 999, 30239}},
        Case{{3, big}, {big, 1}, {0, big - 1, big, 3 * big - 1}},
        Case{{big, 3}, {-1, big}, {0, 5, 3 * big - 2}}}) {
    Dims dims = dimsOf(c.shape);
    Strides st;
    for (size_t d = 0; d < c.strides.size(); ++d)
      st.s[d] = c.strides[d];
    for (int64_t i : c.indices)
      EXPECT_EQ(offsetOf(i, dims, st), referenceOffset(i, c.shape, c.strides))
          << "index " << i << " of rank " << c.shape.size();
  }
  int64_t q, r;
  divMod(big + 5, 3, q, r);
  EXPECT_EQ(q, (big + 5) / 3);
  EXPECT_EQ(r, (big + 5) % 3);
}

/// Every byte a move plan copies goes where the element-wise copy puts it.
static void expectSameBytes(const std::vector<int64_t> &shape, Strides in,
                            int64_t inBase, Strides out, int64_t outBase,
                            int elemBytes, uintptr_t inPtr, uintptr_t outPtr,
                            int expectedWord) {
  std::map<int64_t, int64_t> plain, planned; // out byte -> in byte
  Dims dims = dimsOf(shape);
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  for (int64_t i = 0; i < n; ++i)
    for (int b = 0; b < elemBytes; ++b)
      plain[(outBase + offsetOf(i, dims, out)) * elemBytes + b] =
          (inBase + offsetOf(i, dims, in)) * elemBytes + b;
  MovePlan plan =
      planMove(shape, in, inBase, out, outBase, elemBytes, inPtr, outPtr);
  EXPECT_EQ(plan.wordBytes, expectedWord);
  int64_t words = 1;
  for (int d = 0; d < plan.dims.rank; ++d)
    words *= plan.dims.size[d];
  for (int64_t i = 0; i < words; ++i)
    for (int b = 0; b < plan.wordBytes; ++b)
      planned[(plan.outBase + offsetOf(i, plan.dims, plan.out)) *
                  plan.wordBytes +
              b] =
          (plan.inBase + offsetOf(i, plan.dims, plan.in)) * plan.wordBytes + b;
  EXPECT_EQ(planned, plain);
}

TEST(CudaPlanIndexing, MovesWidenToTheWordsTheirRowsAllow) {
  auto strides = [](std::vector<int64_t> s) {
    Strides st;
    for (size_t d = 0; d < s.size(); ++d)
      st.s[d] = s[d];
    return st;
  };
  // Split of [4, 24] bf16 into [4, 8] pieces at column 8: rows of 16 bytes.
  expectSameBytes({4, 8}, strides({24, 1}), 8, strides({8, 1}), 0, 2, 256, 512,
                  16);
  // The same split at column 4: 8-byte aligned only.
  expectSameBytes({4, 8}, strides({24, 1}), 4, strides({8, 1}), 0, 2, 256, 512,
                  8);
  // A pointer that is only 4-byte aligned caps the word.
  expectSameBytes({4, 8}, strides({24, 1}), 8, strides({8, 1}), 0, 2, 260, 512,
                  4);
  // [B, S, H, D] -> [B, H, S, D] in fp32 with D = 4: 16-byte rows.
  expectSameBytes({2, 3, 5, 4}, strides({60, 4, 12, 1}), 0,
                  strides({60, 20, 4, 1}), 0, 4, 0, 0, 16);
  // A transpose of the innermost dim, odd rows, a step-2 slice, one
  // element: element by element.
  expectSameBytes({3, 5}, strides({1, 3}), 0, strides({5, 1}), 0, 4, 0, 0, 4);
  expectSameBytes({3, 3}, strides({3, 1}), 0, strides({3, 1}), 0, 2, 0, 0, 2);
  expectSameBytes({4}, strides({2}), 1, strides({1}), 0, 2, 0, 0, 2);
  expectSameBytes({1, 1}, strides({1, 1}), 3, strides({1, 1}), 0, 1, 0, 0, 1);
  // A whole contiguous 96-byte copy of int8 becomes 6 words of 16.
  expectSameBytes({2, 48}, strides({48, 1}), 0, strides({48, 1}), 0, 1, 0, 0,
                  16);
  EXPECT_EQ(wordBytesFor(8192, {256, 512}), 16);
  EXPECT_EQ(wordBytesFor(6, {256, 512}), 2);
  EXPECT_EQ(wordBytesFor(8192, {256, 3}), 1);
}
