//===- CudaKernelsTest.cpp - CUDA kernels against the CPU kernels ---------===//
//
// Every CUDA kernel runs on random inputs and is compared with the CPU
// kernel (itself tested against naive references) at a stated tolerance.
// Skips, saying why, where no GPU is visible.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/CudaKernels.h"
#include "CudaTestUtil.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Support/Float16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

using namespace mp::rt;

namespace {

using namespace mp::rt::cudatest;

TEST_F(CudaKernels, BinaryWithBroadcastMatchesCpu) {
  auto a = random({2, 3, 4}), b = random({3, 1});
  Pair out(DType::F32, {2, 3, 4}), ref(DType::F32, {2, 3, 4});
  for (auto kind :
       {cpu::BinaryKind::Add, cpu::BinaryKind::Mul, cpu::BinaryKind::Div}) {
    ASSERT_TRUE(cuda::binary(kind, a->d, b->d, out.d));
    ASSERT_TRUE(cpu::binary(kind, a->h, b->h, ref.h));
    expectNear(out, ref.h, 1e-6);
  }
}

TEST_F(CudaKernels, UnaryMatchesCpu) {
  auto x = random({1000});
  Pair out(DType::F32, {1000}), ref(DType::F32, {1000});
  for (auto kind :
       {cpu::UnaryKind::Exp, cpu::UnaryKind::Tanh, cpu::UnaryKind::Gelu,
        cpu::UnaryKind::GeluTanh, cpu::UnaryKind::Silu, cpu::UnaryKind::Erf}) {
    ASSERT_TRUE(cuda::unary(kind, x->d, out.d));
    ASSERT_TRUE(cpu::unary(kind, x->h, ref.h));
    expectNear(out, ref.h, 1e-5);
  }
}

/// At the infinities, NaN and the largest floats the activations agree
/// with the CPU's (its edges are checked against long double math).
TEST_F(CudaKernels, UnaryEdgesMatchCpu) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> edges = {0.0f,
                                    -0.0f,
                                    1e-40f,
                                    -1e-40f,
                                    30.0f,
                                    -30.0f,
                                    1.9e19f,
                                    -1.9e19f,
                                    std::numeric_limits<float>::max(),
                                    -std::numeric_limits<float>::max(),
                                    inf,
                                    -inf,
                                    std::numeric_limits<float>::quiet_NaN()};
  const int64_t n = static_cast<int64_t>(edges.size());
  Pair x(DType::F32, {n}), out(DType::F32, {n}), ref(DType::F32, {n});
  std::copy(edges.begin(), edges.end(), x.h.as<float>());
  x.upload();
  for (auto kind :
       {cpu::UnaryKind::Exp, cpu::UnaryKind::Tanh, cpu::UnaryKind::Sigmoid,
        cpu::UnaryKind::Gelu, cpu::UnaryKind::GeluTanh, cpu::UnaryKind::Silu,
        cpu::UnaryKind::Erf}) {
    ASSERT_TRUE(cuda::unary(kind, x.d, out.d));
    ASSERT_TRUE(cpu::unary(kind, x.h, ref.h));
    std::vector<uint8_t> bytes = out.download();
    const float *g = reinterpret_cast<const float *>(bytes.data());
    for (int64_t i = 0; i < n; ++i) {
      float want = ref.h.as<float>()[i];
      if (std::isnan(want) || std::isinf(want) || want == 0.0f)
        EXPECT_TRUE(std::isnan(want) ? std::isnan(g[i]) : g[i] == want)
            << "kind " << static_cast<int>(kind) << " at " << edges[i]
            << ": got " << g[i] << ", want " << want;
      else
        EXPECT_NEAR(g[i], want, 1e-5 * std::abs(want)) << "at " << edges[i];
    }
  }
}

TEST_F(CudaKernels, LinearFp32MatchesCpu) {
  auto x = random({2, 5, 64}), w = random({64, 48}), wt = random({48, 64}),
       b = random({48});
  Pair out(DType::F32, {2, 5, 48}), ref(DType::F32, {2, 5, 48});
  ASSERT_TRUE(cuda::linear(x->d, w->d, &b->d, false, out.d));
  ASSERT_TRUE(cpu::linear(x->h, w->h, &b->h, false, ref.h));
  expectNear(out, ref.h, 1e-4);
  ASSERT_TRUE(cuda::linear(x->d, wt->d, nullptr, true, out.d));
  ASSERT_TRUE(cpu::linear(x->h, wt->h, nullptr, true, ref.h));
  expectNear(out, ref.h, 1e-4);
}

TEST_F(CudaKernels, LinearBf16AccumulatesInFp32) {
  auto x = random({16, 256}), w = random({256, 32});
  Pair xb(DType::BF16, {16, 256}), wb(DType::BF16, {256, 32}),
      ob(DType::BF16, {16, 32}), out(DType::F32, {16, 32}),
      ref(DType::F32, {16, 32});
  ASSERT_TRUE(cuda::cast(x->d, xb.d));
  ASSERT_TRUE(cuda::cast(w->d, wb.d));
  ASSERT_TRUE(cuda::linear(xb.d, wb.d, nullptr, false, ob.d));
  ASSERT_TRUE(cuda::cast(ob.d, out.d));
  // The reference is the fp32 product of the same bf16-rounded inputs, so
  // that what remains is the output's rounding (2^-9 relative) and the
  // summation order. Against unrounded inputs, the inputs' rounding errors
  // (about 0.05 over 256 products of up to 4) swamp results near zero. A
  // bf16 accumulator would be off by about 2^-9 of the running sum, far
  // more than this tolerance for the small results.
  for (Pair *p : {x.get(), w.get()})
    for (int64_t i = 0; i < p->h.numel(); ++i)
      p->h.as<float>()[i] =
          mp::bf16ToFloat(mp::floatToBf16(p->h.as<float>()[i]));
  ASSERT_TRUE(cpu::linear(x->h, w->h, nullptr, false, ref.h));
  expectNear(out, ref.h, 4e-3);
}

TEST_F(CudaKernels, NormsAndSoftmaxMatchCpu) {
  auto x = random({6, 96}), s = random({96}), b = random({96});
  Pair out(DType::F32, {6, 96}), ref(DType::F32, {6, 96});
  ASSERT_TRUE(cuda::layerNorm(x->d, s->d, &b->d, 1, 1e-5f, out.d));
  ASSERT_TRUE(cpu::layerNorm(x->h, s->h, &b->h, 1, 1e-5f, ref.h));
  expectNear(out, ref.h, 1e-4);
  ASSERT_TRUE(cuda::rmsNorm(x->d, s->d, 1e-6f, out.d));
  ASSERT_TRUE(cpu::rmsNorm(x->h, s->h, 1e-6f, ref.h));
  expectNear(out, ref.h, 1e-4);
  ASSERT_TRUE(cuda::softmax(x->d, 1, out.d));
  ASSERT_TRUE(cpu::softmax(x->h, 1, ref.h));
  expectNear(out, ref.h, 1e-5);
  ASSERT_TRUE(cuda::softmax(x->d, 0, out.d));
  ASSERT_TRUE(cpu::softmax(x->h, 0, ref.h));
  expectNear(out, ref.h, 1e-5);
}

TEST_F(CudaKernels, CausalGroupedQueryAttentionMatchesCpu) {
  auto q = random({2, 4, 8, 16}), k = random({2, 2, 8, 16}),
       v = random({2, 2, 8, 16});
  Pair out(DType::F32, {2, 4, 8, 16}), ref(DType::F32, {2, 4, 8, 16});
  ASSERT_TRUE(cuda::attention(q->d, k->d, v->d, nullptr, 0.25f, true, out.d));
  ASSERT_TRUE(cpu::attention(q->h, k->h, v->h, nullptr, 0.25f, true, ref.h));
  expectNear(out, ref.h, 1e-4);
}

TEST_F(CudaKernels, MaskedDecodeStepAttentionMatchesCpu) {
  // 3 queries over a 9-key cache, causal, plus a per-key additive mask.
  auto q = random({2, 2, 3, 8}), k = random({2, 2, 9, 8}),
       v = random({2, 2, 9, 4}), mask = random({2, 1, 1, 9});
  Pair out(DType::F32, {2, 2, 3, 4}), ref(DType::F32, {2, 2, 3, 4});
  ASSERT_TRUE(cuda::attention(q->d, k->d, v->d, &mask->d, 0.3f, true, out.d));
  ASSERT_TRUE(cpu::attention(q->h, k->h, v->h, &mask->h, 0.3f, true, ref.h));
  expectNear(out, ref.h, 1e-4);
}

TEST_F(CudaKernels, AttentionOverManyKeysMatchesCpu) {
  // More keys than one block's shared memory could hold as scores.
  auto q = random({1, 2, 4, 8}, -0.5, 0.5), k = random({1, 2, 20000, 8}),
       v = random({1, 2, 20000, 4});
  Pair out(DType::F32, {1, 2, 4, 4}), ref(DType::F32, {1, 2, 4, 4});
  ASSERT_TRUE(cuda::attention(q->d, k->d, v->d, nullptr, 0.3f, false, out.d));
  ASSERT_TRUE(cpu::attention(q->h, k->h, v->h, nullptr, 0.3f, false, ref.h));
  expectNear(out, ref.h, 1e-4);
}

TEST_F(CudaKernels, AttentionRunsWithinTheScratchTheExecutorLends) {
  // What an executable sizes at load (attentionScratchBytes) and lends is all
  // the attention uses; one byte less is an error naming both sizes, not an
  // allocation behind the executable's back.
  auto q = random({2, 4, 32, 16}), k = random({2, 2, 3000, 16}),
       v = random({2, 2, 3000, 16});
  Pair out(DType::F32, {2, 4, 32, 16}), ref(DType::F32, {2, 4, 32, 16});
  const size_t need = cuda::attentionScratchBytes(q->d, k->d, v->d);
  EXPECT_EQ(need, size_t(2 * 2) * 2 * 32 * 3000 * sizeof(float)); // one chunk
  ASSERT_TRUE(cuda::prepare());
  void *block = nullptr;
  ASSERT_TRUE(cuda::allocate(need, &block));
  cuda::lendScratch(block, need);
  Status fits = cuda::attention(q->d, k->d, v->d, nullptr, 0.25f, true, out.d);
  cuda::lendScratch(block, need - 1);
  Status tooSmall =
      cuda::attention(q->d, k->d, v->d, nullptr, 0.25f, true, out.d);
  cuda::withdrawScratch();
  EXPECT_TRUE(cuda::synchronize());
  cuda::release(block);
  ASSERT_TRUE(fits) << fits.message;
  ASSERT_FALSE(tooSmall);
  EXPECT_NE(tooSmall.message.find("needs " + std::to_string(need) +
                                  " bytes but the executable reserved " +
                                  std::to_string(need - 1)),
            std::string::npos)
      << tooSmall.message;
  ASSERT_TRUE(cpu::attention(q->h, k->h, v->h, nullptr, 0.25f, true, ref.h));
  expectNear(out, ref.h, 1e-4);
}

TEST_F(CudaKernels, BroadcastBatchedMatmulMatchesCpu) {
  auto a = random({2, 1, 4, 5}), b = random({1, 3, 5, 6});
  Pair out(DType::F32, {2, 3, 4, 6}), ref(DType::F32, {2, 3, 4, 6});
  ASSERT_TRUE(cuda::matmul(a->d, b->d, out.d));
  ASSERT_TRUE(cpu::matmul(a->h, b->h, ref.h));
  expectNear(out, ref.h, 1e-5);
}

TEST_F(CudaKernels, CrossEntropyMatchesCpuInFp32AndBf16Results) {
  auto logits = random({6, 50});
  Pair targets(DType::I64, {6});
  // -100 is left out of the mean (PyTorch's ignore_index).
  int64_t values[6] = {0, 49, -100, 7, 13, 21};
  std::memcpy(targets.h.data, values, sizeof(values));
  targets.upload();
  Pair loss(DType::F32, {}), ref(DType::F32, {});
  ASSERT_TRUE(cuda::crossEntropy(logits->d, targets.d, loss.d));
  ASSERT_TRUE(cpu::crossEntropy(logits->h, targets.h, ref.h));
  expectNear(loss, ref.h, 1e-5);
  // A bf16 program's loss: accumulated in fp32, stored in bf16.
  Pair low(DType::BF16, {}), back(DType::F32, {});
  ASSERT_TRUE(cuda::crossEntropy(logits->d, targets.d, low.d));
  ASSERT_TRUE(cuda::cast(low.d, back.d));
  expectNear(back, ref.h, 1e-2);
}

TEST_F(CudaKernels, IntegerBinaryAndWhereMatchCpu) {
  Pair a(DType::I64, {2, 3}), b(DType::I64, {3}), out(DType::I64, {2, 3}),
      ref(DType::I64, {2, 3});
  int64_t av[6] = {7, -7, 3, 0, 9, -2}, bv[3] = {2, -1, 3};
  std::memcpy(a.h.data, av, sizeof(av));
  std::memcpy(b.h.data, bv, sizeof(bv));
  a.upload();
  b.upload();
  for (auto kind :
       {cpu::BinaryKind::Add, cpu::BinaryKind::Sub, cpu::BinaryKind::Mul,
        cpu::BinaryKind::Div, cpu::BinaryKind::Pow}) {
    ASSERT_TRUE(cuda::binary(kind, a.d, b.d, out.d));
    ASSERT_TRUE(cpu::binary(kind, a.h, b.h, ref.h));
    std::vector<uint8_t> got = out.download();
    EXPECT_EQ(std::memcmp(got.data(), ref.h.data, ref.h.bytes()), 0)
        << "binary kind " << static_cast<int>(kind);
  }
  Pair cond(DType::Bool, {3});
  uint8_t cv[3] = {1, 0, 1};
  std::memcpy(cond.h.data, cv, sizeof(cv));
  cond.upload();
  ASSERT_TRUE(cuda::where(cond.d, a.d, b.d, out.d));
  ASSERT_TRUE(cpu::where(cond.h, a.h, b.h, ref.h));
  std::vector<uint8_t> got = out.download();
  EXPECT_EQ(std::memcmp(got.data(), ref.h.data, ref.h.bytes()), 0);
}

TEST_F(CudaKernels, EinsumMatchesCpu) {
  auto a = random({2, 3, 4}), b = random({4, 5});
  Pair out(DType::F32, {2, 5, 3}), ref(DType::F32, {2, 5, 3});
  ASSERT_TRUE(cuda::einsum("bij,jk->bki", {&a->d, &b->d}, out.d));
  ASSERT_TRUE(cpu::einsum("bij,jk->bki", {&a->h, &b->h}, ref.h));
  expectNear(out, ref.h, 1e-5);
}

TEST_F(CudaKernels, TransposeExpandAndGatherMatchCpu) {
  auto x = random({2, 3, 4, 5});
  Pair out(DType::F32, {2, 4, 3, 5}), ref(DType::F32, {2, 4, 3, 5});
  ASSERT_TRUE(cuda::transpose(x->d, {0, 2, 1, 3}, out.d));
  ASSERT_TRUE(cpu::transpose(x->h, {0, 2, 1, 3}, ref.h));
  expectNear(out, ref.h, 0);

  expectGatherMatchesCpu<int64_t>({10, 8}, {9, 0, -1});

  auto small = random({3, 1});
  Pair wide(DType::F32, {2, 3, 4}), wideRef(DType::F32, {2, 3, 4});
  ASSERT_TRUE(cuda::expand(small->d, wide.d));
  ASSERT_TRUE(cpu::expand(small->h, wideRef.h));
  expectNear(wide, wideRef.h, 0);
}

/// Splits, concats, slices, transposes and row gathers move 16-, 8- or
/// 4-byte words as their rows and offsets allow (planMove): each width,
/// exactly as the CPU kernels move elements.
TEST_F(CudaKernels, MovesInWideWordsMatchCpu) {
  auto x = random({4, 24});
  for (std::vector<int64_t> widths :
       {std::vector<int64_t>{8, 8, 8}, {4, 12, 8}, {3, 21}, {2, 2, 20}}) {
    std::vector<std::unique_ptr<Pair>> parts, refs;
    std::vector<Tensor *> partsD, refsH;
    std::vector<const Tensor *> partsC;
    for (int64_t w : widths) {
      parts.push_back(
          std::make_unique<Pair>(DType::F32, std::vector<int64_t>{4, w}));
      refs.push_back(
          std::make_unique<Pair>(DType::F32, std::vector<int64_t>{4, w}));
      partsD.push_back(&parts.back()->d);
      refsH.push_back(&refs.back()->h);
      partsC.push_back(&parts.back()->d);
    }
    ASSERT_TRUE(cuda::split(x->d, 1, partsD));
    ASSERT_TRUE(cpu::split(x->h, 1, refsH));
    for (size_t i = 0; i < parts.size(); ++i)
      expectNear(*parts[i], refs[i]->h, 0);
    Pair joined(DType::F32, {4, 24});
    ASSERT_TRUE(cuda::concat(partsC, 1, joined.d));
    expectNear(joined, x->h, 0);
  }
  Pair sliced(DType::F32, {2, 8}), slicedRef(DType::F32, {2, 8});
  ASSERT_TRUE(cuda::slice(x->d, {1, 4}, {2, 1}, sliced.d));
  ASSERT_TRUE(cpu::slice(x->h, {1, 4}, {2, 1}, slicedRef.h));
  expectNear(sliced, slicedRef.h, 0);

  auto heads = random({2, 3, 5, 8});
  Pair t(DType::F32, {2, 5, 3, 8}), tRef(DType::F32, {2, 5, 3, 8});
  ASSERT_TRUE(cuda::transpose(heads->d, {0, 2, 1, 3}, t.d));
  ASSERT_TRUE(cpu::transpose(heads->h, {0, 2, 1, 3}, tRef.h));
  expectNear(t, tRef.h, 0);

  expectGatherMatchesCpu<int32_t>({10, 3}, {9, 0, -1}); // 12-byte rows
}

/// This rank holds vocabulary rows 4..13 of 20: other ids give zero rows.
TEST_F(CudaKernels, VocabParallelEmbeddingCopiesOnlyItsRows) {
  auto table = random({10, 8});
  Pair ids(DType::I64, {5});
  int64_t values[5] = {5, 3, 13, -1, 14};
  std::memcpy(ids.h.data, values, sizeof(values));
  ids.upload();
  Pair out(DType::F32, {5, 8}), expected(DType::F32, {5, 8});
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t c = 0; c < 8; ++c) {
      int64_t id = values[k] < 0 ? values[k] + 20 : values[k];
      bool mine = id >= 4 && id < 14;
      expected.h.as<float>()[k * 8 + c] =
          mine ? table->h.as<float>()[(id - 4) * 8 + c] : 0.0f;
    }
  ASSERT_TRUE(cuda::vocabEmbedding(table->d, ids.d, 4, 20, out.d));
  expectNear(out, expected.h, 0);
}

//===----------------------------------------------------------------------===//
// The CPU's other element types (fp64, integers, bool) on CUDA
//===----------------------------------------------------------------------===//

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::F64 || t == DType::F16 ||
         t == DType::BF16;
}

/// A host tensor owning its bytes.
struct HostTensor {
  std::vector<uint8_t> bytes;
  Tensor t;
  HostTensor(DType dtype, std::vector<int64_t> shape) {
    t = Tensor{nullptr, dtype, std::move(shape)};
    bytes.resize(t.bytes());
    t.data = bytes.data();
  }
};

template <class S> HostTensor hostOf(DType dtype, std::vector<S> values) {
  HostTensor h(dtype, {static_cast<int64_t>(values.size())});
  std::memcpy(h.t.data, values.data(), h.t.bytes());
  return h;
}

class CudaKernelsTypes : public CudaKernels {
protected:
  /// A device tensor of `dtype` holding `source` converted by the CPU cast.
  std::unique_ptr<Pair> converted(DType dtype, const Tensor &source) {
    auto p = std::make_unique<Pair>(dtype, source.shape);
    EXPECT_TRUE(cpu::cast(source, p->h));
    p->upload();
    return p;
  }
  std::unique_ptr<Pair> randomOf(DType dtype, std::vector<int64_t> shape,
                                 double lo, double hi) {
    HostTensor src(DType::F64, std::move(shape));
    std::uniform_real_distribution<double> dist(lo, hi);
    for (int64_t i = 0; i < src.t.numel(); ++i)
      src.t.as<double>()[i] = dist(rng);
    return converted(dtype, src.t);
  }
  /// Integers and bools bit for bit; floats within `tol` relative (NaN
  /// equals NaN: NaN payloads may differ).
  void expectSame(Pair &got, const Tensor &want, double tol) {
    std::vector<uint8_t> bytes = got.download();
    if (!isFloat(want.dtype)) {
      EXPECT_EQ(std::memcmp(bytes.data(), want.data, want.bytes()), 0);
      return;
    }
    HostTensor g(DType::F64, want.shape), w(DType::F64, want.shape);
    ASSERT_TRUE(cpu::cast(Tensor{bytes.data(), want.dtype, want.shape}, g.t));
    ASSERT_TRUE(cpu::cast(want, w.t));
    for (int64_t i = 0; i < want.numel(); ++i) {
      double a = g.t.as<double>()[i], b = w.t.as<double>()[i];
      if (std::isnan(b) || std::isinf(b)) {
        EXPECT_TRUE(std::isnan(b) ? std::isnan(a) : a == b)
            << "element " << i << ": " << a << " vs " << b;
        continue;
      }
      ASSERT_NEAR(a, b, tol * (1 + std::abs(b))) << "element " << i;
    }
  }
};

TEST_F(CudaKernelsTypes, Fp64ElementwiseSoftmaxReduceAndMatmulMatchCpu) {
  const double tol = 1e-12;
  auto a = randomOf(DType::F64, {3, 4}, 0.1, 2),
       b = randomOf(DType::F64, {4}, 0.1, 2);
  Pair out(DType::F64, {3, 4}), ref(DType::F64, {3, 4});
  for (auto kind :
       {cpu::BinaryKind::Add, cpu::BinaryKind::Sub, cpu::BinaryKind::Mul,
        cpu::BinaryKind::Div, cpu::BinaryKind::Pow}) {
    ASSERT_TRUE(cuda::binary(kind, a->d, b->d, out.d));
    ASSERT_TRUE(cpu::binary(kind, a->h, b->h, ref.h));
    SCOPED_TRACE("binary " + std::to_string(static_cast<int>(kind)));
    expectSame(out, ref.h, tol);
  }
  for (int kind = 0; kind <= static_cast<int>(cpu::UnaryKind::Sin); ++kind) {
    ASSERT_TRUE(cuda::unary(static_cast<cpu::UnaryKind>(kind), a->d, out.d));
    ASSERT_TRUE(cpu::unary(static_cast<cpu::UnaryKind>(kind), a->h, ref.h));
    SCOPED_TRACE("unary " + std::to_string(kind));
    expectSame(out, ref.h, tol);
  }
  for (int64_t axis : {0, 1}) {
    ASSERT_TRUE(cuda::softmax(a->d, axis, out.d));
    ASSERT_TRUE(cpu::softmax(a->h, axis, ref.h));
    expectSame(out, ref.h, tol);
  }
  Pair rows(DType::F64, {3}), rowsRef(DType::F64, {3});
  for (int kind = 0; kind <= static_cast<int>(cpu::ReduceKind::Min); ++kind) {
    ASSERT_TRUE(
        cuda::reduce(static_cast<cpu::ReduceKind>(kind), a->d, {1}, rows.d));
    ASSERT_TRUE(
        cpu::reduce(static_cast<cpu::ReduceKind>(kind), a->h, {1}, rowsRef.h));
    expectSame(rows, rowsRef.h, tol);
  }
  auto m = randomOf(DType::F64, {2, 3, 4}, -1, 1),
       n = randomOf(DType::F64, {4, 5}, -1, 1);
  Pair prod(DType::F64, {2, 3, 5}), prodRef(DType::F64, {2, 3, 5});
  ASSERT_TRUE(cuda::matmul(m->d, n->d, prod.d));
  ASSERT_TRUE(cpu::matmul(m->h, n->h, prodRef.h));
  expectSame(prod, prodRef.h, tol);
}

TEST_F(CudaKernelsTypes, IntegerUnaryReduceAndMatmulWrapAsOnTheCpu) {
  const int32_t lo = std::numeric_limits<int32_t>::min(),
                hi = std::numeric_limits<int32_t>::max();
  HostTensor src = hostOf<int32_t>(DType::I32, {lo, hi, -5, 0, 7, lo + 1});
  src.t.shape = {2, 3};
  auto x = converted(DType::I32, src.t);
  Pair out(DType::I32, {2, 3}), ref(DType::I32, {2, 3});
  for (auto kind : {cpu::UnaryKind::Neg, cpu::UnaryKind::Relu}) {
    ASSERT_TRUE(cuda::unary(kind, x->d, out.d));
    ASSERT_TRUE(cpu::unary(kind, x->h, ref.h));
    expectSame(out, ref.h, 0);
  }
  EXPECT_FALSE(cuda::unary(cpu::UnaryKind::Exp, x->d, out.d));
  for (DType t : {DType::I32, DType::I64}) {
    auto xt = converted(t, src.t);
    Pair cols(t, {3}), colsRef(t, {3});
    for (int kind = 0; kind <= static_cast<int>(cpu::ReduceKind::Min); ++kind) {
      ASSERT_TRUE(
          cuda::reduce(static_cast<cpu::ReduceKind>(kind), xt->d, {0}, cols.d));
      ASSERT_TRUE(cpu::reduce(static_cast<cpu::ReduceKind>(kind), xt->h, {0},
                              colsRef.h));
      SCOPED_TRACE(std::string(dtypeName(t)) + " reduce " +
                   std::to_string(kind));
      expectSame(cols, colsRef.h, 0);
    }
    Pair prod(t, {2, 2}), prodRef(t, {2, 2});
    HostTensor wsrc = hostOf<int32_t>(DType::I32, {hi, 3, -2, lo, 9, hi});
    wsrc.t.shape = {3, 2};
    auto w = converted(t, wsrc.t);
    ASSERT_TRUE(cuda::matmul(xt->d, w->d, prod.d));
    ASSERT_TRUE(cpu::matmul(xt->h, w->h, prodRef.h));
    SCOPED_TRACE(std::string(dtypeName(t)) + " matmul");
    expectSame(prod, prodRef.h, 0);
  }
}

TEST_F(CudaKernelsTypes, LongReductionsUseABlockPerOutputAndMatchCpu) {
  // 3 outputs of 40000 elements each (a block per output), and one of all
  // 120000 (a full reduction), in fp32 (sums in fp64, as on the CPU), fp64
  // and i64 (sums wrap), with a NaN that max and min must propagate.
  for (DType t : {DType::F32, DType::F64, DType::I64}) {
    SCOPED_TRACE(dtypeName(t));
    auto x = randomOf(t, {3, 40000}, -1e6, 1e6);
    if (t == DType::I64) { // near the limits: sums wrap
      for (int64_t i = 0; i < 120000; i += 7)
        x->h.as<int64_t>()[i] = std::numeric_limits<int64_t>::max() - i;
      x->upload();
    }
    if (t == DType::F32) {
      x->h.as<float>()[40000 + 123] = std::numeric_limits<float>::quiet_NaN();
      x->upload();
    }
    for (int kind = 0; kind <= static_cast<int>(cpu::ReduceKind::Min); ++kind) {
      SCOPED_TRACE("reduce " + std::to_string(kind));
      const auto k = static_cast<cpu::ReduceKind>(kind);
      Pair rows(t, {3}), rowsRef(t, {3}), all(t, {}), allRef(t, {});
      ASSERT_TRUE(cuda::reduce(k, x->d, {1}, rows.d));
      ASSERT_TRUE(cpu::reduce(k, x->h, {1}, rowsRef.h));
      // fp32 results round an fp64 sum: summed in another order, it may
      // round to the neighbouring float.
      const double tol = t == DType::F32 ? 2e-7 : 1e-9;
      expectSame(rows, rowsRef.h, tol);
      ASSERT_TRUE(cuda::reduce(k, x->d, {0, 1}, all.d));
      ASSERT_TRUE(cpu::reduce(k, x->h, {0, 1}, allRef.h));
      expectSame(all, allRef.h, tol);
    }
  }
}

TEST_F(CudaKernelsTypes, SoftmaxOfMaskedAndNaNRowsMatchesCpu) {
  // Rows of -inf give zeros; a NaN makes its row NaN; along either axis.
  const double inf = std::numeric_limits<double>::infinity(),
               nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor src =
      hostOf<double>(DType::F64, {-inf, -inf, -inf, 1, nan, 2, 0.5, -inf, 3});
  src.t.shape = {3, 3};
  for (DType t : {DType::F32, DType::F64})
    for (int64_t axis : {0, 1}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " axis " + std::to_string(axis));
      auto x = converted(t, src.t);
      Pair out(t, {3, 3}), ref(t, {3, 3});
      ASSERT_TRUE(cuda::softmax(x->d, axis, out.d));
      ASSERT_TRUE(cpu::softmax(x->h, axis, ref.h));
      expectSame(out, ref.h, 1e-6);
    }
}

TEST_F(CudaKernelsTypes, MismatchedElementTypesAreErrors) {
  auto a = randomOf(DType::I64, {2, 3}, -5, 5),
       b = randomOf(DType::I32, {3, 2}, -5, 5);
  Pair out(DType::I64, {2, 2});
  Status s = cuda::matmul(a->d, b->d, out.d);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message.find("element types differ (i64 and i32)"),
            std::string::npos)
      << s.message;
  EXPECT_FALSE(cuda::binary(cpu::BinaryKind::Add, a->d, a->d, b->d));
}

TEST_F(CudaKernelsTypes, Int64CompareIsExactAboveTwoToThe53) {
  const int64_t big = int64_t(1) << 53;
  HostTensor av = hostOf<int64_t>(DType::I64, {big + 1, big, -big - 1});
  HostTensor bv = hostOf<int64_t>(DType::I64, {big, big + 1, -big});
  auto a = converted(DType::I64, av.t), b = converted(DType::I64, bv.t);
  Pair out(DType::Bool, {3}), ref(DType::Bool, {3});
  for (int kind = 0; kind <= static_cast<int>(cpu::CompareKind::Ge); ++kind) {
    ASSERT_TRUE(
        cuda::compare(static_cast<cpu::CompareKind>(kind), a->d, b->d, out.d));
    ASSERT_TRUE(
        cpu::compare(static_cast<cpu::CompareKind>(kind), a->h, b->h, ref.h));
    SCOPED_TRACE("compare " + std::to_string(kind));
    expectSame(out, ref.h, 0);
  }
}

TEST_F(CudaKernelsTypes, CastsMatchCpuForEveryPairOfTypes) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor floats =
      hostOf<double>(DType::F64, {0.0, -0.0, 1.5, -2.5, 0.1, 65504.0, 1e10,
                                  -1e30, 3e38, 1e300, nan, -7.75});
  HostTensor ints = hostOf<int64_t>(
      DType::I64,
      {0, 1, -1, 127, 128, -129, int64_t(1) << 31, -(int64_t(1) << 31) - 1,
       (int64_t(1) << 53) + 1, std::numeric_limits<int64_t>::max(),
       std::numeric_limits<int64_t>::min(), 65519});
  const DType all[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                       DType::I64, DType::I32, DType::I8,  DType::Bool};
  for (DType from : all)
    for (DType to : all) {
      auto x = converted(from, isFloat(from) ? floats.t : ints.t);
      Pair out(to, x->h.shape), ref(to, x->h.shape);
      ASSERT_TRUE(cuda::cast(x->d, out.d));
      ASSERT_TRUE(cpu::cast(x->h, ref.h));
      SCOPED_TRACE(std::string(dtypeName(from)) + " to " + dtypeName(to));
      expectSame(out, ref.h, 0);
    }
}

/// Runs `op` on fp16 and bf16 copies of fp32 device inputs and compares the
/// result (cast back to fp32) with the CPU fp32 result at a per-dtype
/// tolerance: fp16 has 11 significant bits, bf16 8.
class CudaKernelsHalf : public CudaKernels {
protected:
  void compareInHalf(
      const std::vector<Pair *> &inputs, const Tensor &expected,
      const std::function<Status(std::vector<Tensor> &, Tensor &)> &op) {
    for (auto [dtype, tol] :
         {std::pair(DType::F16, 5e-3), std::pair(DType::BF16, 4e-2)}) {
      std::vector<std::unique_ptr<Pair>> low;
      std::vector<Tensor> args;
      for (Pair *in : inputs) {
        low.push_back(std::make_unique<Pair>(dtype, in->h.shape));
        ASSERT_TRUE(cuda::cast(in->d, low.back()->d));
        args.push_back(low.back()->d);
      }
      Pair out(dtype, expected.shape), back(DType::F32, expected.shape);
      Status s = op(args, out.d);
      ASSERT_TRUE(s) << dtypeName(dtype) << ": " << s.message;
      ASSERT_TRUE(cuda::cast(out.d, back.d));
      SCOPED_TRACE(dtypeName(dtype));
      expectNear(back, expected, tol);
    }
  }
};

TEST_F(CudaKernelsHalf, NormsSoftmaxAndGeluInFp16AndBf16) {
  auto x = random({4, 64}), s = random({64}, 0.5, 1.5), b = random({64});
  Pair ref(DType::F32, {4, 64});
  ASSERT_TRUE(cpu::layerNorm(x->h, s->h, &b->h, 1, 1e-5f, ref.h));
  compareInHalf({x.get(), s.get(), b.get()}, ref.h,
                [](std::vector<Tensor> &a, Tensor &o) {
                  return cuda::layerNorm(a[0], a[1], &a[2], 1, 1e-5f, o);
                });
  ASSERT_TRUE(cpu::softmax(x->h, 1, ref.h));
  compareInHalf({x.get()}, ref.h, [](std::vector<Tensor> &a, Tensor &o) {
    return cuda::softmax(a[0], 1, o);
  });
  ASSERT_TRUE(cpu::unary(cpu::UnaryKind::Gelu, x->h, ref.h));
  compareInHalf({x.get()}, ref.h, [](std::vector<Tensor> &a, Tensor &o) {
    return cuda::unary(cpu::UnaryKind::Gelu, a[0], o);
  });
}

TEST_F(CudaKernelsHalf, AttentionAndBiasLinearInFp16AndBf16) {
  auto q = random({1, 4, 8, 16}, -1, 1), k = random({1, 2, 8, 16}, -1, 1),
       v = random({1, 2, 8, 16}, -1, 1);
  Pair ref(DType::F32, {1, 4, 8, 16});
  ASSERT_TRUE(cpu::attention(q->h, k->h, v->h, nullptr, 0.25f, true, ref.h));
  compareInHalf({q.get(), k.get(), v.get()}, ref.h,
                [](std::vector<Tensor> &a, Tensor &o) {
                  return cuda::attention(a[0], a[1], a[2], nullptr, 0.25f, true,
                                         o);
                });
  auto x = random({8, 32}, -1, 1), w = random({32, 16}, -1, 1),
       bias = random({16}, -1, 1);
  Pair lin(DType::F32, {8, 16});
  ASSERT_TRUE(cpu::linear(x->h, w->h, &bias->h, false, lin.h));
  compareInHalf({x.get(), w.get(), bias.get()}, lin.h,
                [](std::vector<Tensor> &a, Tensor &o) {
                  return cuda::linear(a[0], a[1], &a[2], false, o);
                });
}

} // namespace
