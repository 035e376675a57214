//===- KernelsLinalgTest.cpp - CPU GEMM-based kernels
//-----------------------===//
//
// matmul, linear and attention; results independent of the thread
// count; element types each kernel refuses. Checked against references written
// here in double precision; see KernelTestUtil.h.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace mp::rt;
using namespace mp::rt::cpu;
using namespace mp::rt::test;

namespace {

//===----------------------------------------------------------------------===//
// matmul / linear
//===----------------------------------------------------------------------===//

/// numpy.matmul reference.
std::vector<double> refMatmul(const Buf &a, const Buf &b,
                              const Shape &outShape) {
  Shape as = a.t.shape, bs = b.t.shape;
  bool aVec = as.size() == 1, bVec = bs.size() == 1;
  if (aVec)
    as.insert(as.begin(), 1);
  if (bVec)
    bs.push_back(1);
  int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  Shape aB(as.begin(), as.end() - 2), bB(bs.begin(), bs.end() - 2);
  size_t r = std::max(aB.size(), bB.size());
  Shape batch(r);
  for (size_t d = 0; d < r; ++d) {
    int64_t x = d + aB.size() >= r ? aB[d + aB.size() - r] : 1;
    int64_t y = d + bB.size() >= r ? bB[d + bB.size() - r] : 1;
    batch[d] = std::max(x, y);
  }
  int64_t nb = numelOf(batch);
  EXPECT_EQ(nb * m * n, numelOf(outShape));
  std::vector<double> out(static_cast<size_t>(nb * m * n));
  for (int64_t t = 0; t < nb; ++t) {
    int64_t ai = broadcastIndex(aB, batch, t),
            bi = broadcastIndex(bB, batch, t);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk)
          s += a.get((ai * m + i) * k + kk) * b.get((bi * k + kk) * n + j);
        out[size_t((t * m + i) * n + j)] = s;
      }
  }
  return out;
}

TEST(KernelMatmul, ShapesAndBroadcast) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {
      {{7, 13}, {13, 5}, {7, 5}},
      {{2, 1, 4, 6}, {3, 6, 5}, {2, 3, 4, 5}},    // batch broadcast
      {{6}, {2, 6, 5}, {2, 5}},                   // rank-1 a
      {{3, 4, 6}, {6}, {3, 4}},                   // rank-1 b
      {{6}, {6}, {}},                             // dot
      {{2, 3, 4, 6}, {6, 5}, {2, 3, 4, 5}},       // folded into one GEMM
      {{1, 4, 6}, {3, 6, 5}, {3, 4, 5}},          // a broadcast over batch
      {{16, 32, 64}, {16, 64, 48}, {16, 32, 48}}, // parallel over batches
      {{3, 0, 4}, {4, 2}, {3, 0, 2}},             // empty
      {{2, 3, 0}, {0, 4}, {2, 3, 4}},             // K = 0
  };
  uint32_t seed = 300;
  for (const Case &c : cases)
    for (DType dt : {DType::F32, DType::F64}) {
      Buf a = randomBuf(dt, c.a, seed++), b = randomBuf(dt, c.b, seed++);
      Buf out(dt, c.out);
      ASSERT_TRUE(matmul(a.t, b.t, out.t).ok);
      expectClose(out, refMatmul(a, b, c.out), dt == DType::F32 ? kRtol : 1e-12,
                  dt == DType::F32 ? 1e-5 : 1e-12,
                  formatShape(c.a) + " @ " + formatShape(c.b));
    }
}

TEST(KernelMatmul, Integers) {
  uint32_t seed = 350;
  for (DType dt : {DType::I64, DType::I32, DType::I8}) {
    Buf a = randomBuf(dt, {2, 3, 5}, seed++, -4, 4);
    Buf b = randomBuf(dt, {5, 4}, seed++, -4, 4);
    Buf out(dt, {2, 3, 4});
    ASSERT_TRUE(matmul(a.t, b.t, out.t).ok);
    expectExact(out, refMatmul(a, b, out.t.shape), dtypeName(dt));
  }
  // i8 wraps: 100 * 2 + 100 * 1 = 300 -> 44.
  Buf a = fromValues(DType::I8, {1, 2}, {100, 100});
  Buf b = fromValues(DType::I8, {2, 1}, {2, 1});
  Buf out(DType::I8, {1, 1});
  ASSERT_TRUE(matmul(a.t, b.t, out.t).ok);
  EXPECT_EQ(out.p<int8_t>()[0], 44);
}

std::vector<double> refLinear(const Buf &x, const Buf &w, const Buf *bias,
                              bool transposed) {
  int64_t k = x.t.shape.back();
  int64_t n = transposed ? w.t.shape[0] : w.t.shape[1];
  int64_t m = x.n() / k;
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = bias ? bias->get(j) : 0;
      for (int64_t kk = 0; kk < k; ++kk)
        s += x.get(i * k + kk) * w.get(transposed ? j * k + kk : kk * n + j);
      out[size_t(i * n + j)] = s;
    }
  return out;
}

/// Random x of shape `xs`, a weight ([K, N], or [N, K] when `transposed`),
/// a bias and the result of a linear (N = 96 for K = 64, else 6).
struct LinearOperands {
  Buf x, w, bias, out;
};
LinearOperands linearOperands(const Shape &xs, bool transposed,
                              uint32_t &seed) {
  int64_t k = xs.back(), n = k == 64 ? 96 : 6;
  Buf x = randomBuf(DType::F32, xs, seed++);
  Buf w = randomBuf(DType::F32, transposed ? Shape{n, k} : Shape{k, n}, seed++);
  Buf bias = randomBuf(DType::F32, {n}, seed++);
  Shape os = xs;
  os.back() = n;
  return {std::move(x), std::move(w), std::move(bias), Buf(DType::F32, os)};
}

TEST(KernelLinear, BiasTransposeAndRank3) {
  uint32_t seed = 400;
  for (Shape xs : {Shape{5, 8}, Shape{2, 5, 8}, Shape{4, 33, 64}, Shape{8}})
    for (bool transposed : {false, true})
      for (bool withBias : {false, true}) {
        auto [x, w, bias, out] = linearOperands(xs, transposed, seed);
        ASSERT_TRUE(
            linear(x.t, w.t, withBias ? &bias.t : nullptr, transposed, out.t)
                .ok);
        expectClose(out,
                    refLinear(x, w, withBias ? &bias : nullptr, transposed),
                    kRtol, 1e-5,
                    formatShape(xs) + (transposed ? " T" : "") +
                        (withBias ? " bias" : ""));
      }
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

std::vector<double> refAttention(const Buf &q, const Buf &k, const Buf &v,
                                 const Buf *mask, double scale, bool causal) {
  int64_t B = q.t.shape[0], H = q.t.shape[1], Sq = q.t.shape[2],
          D = q.t.shape[3];
  int64_t Hkv = k.t.shape[1], Sk = k.t.shape[2], Dv = v.t.shape[3];
  Shape full = {B, H, Sq, Sk};
  std::vector<double> out(static_cast<size_t>(B * H * Sq * Dv), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t hk = h / (H / Hkv);
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> s(static_cast<size_t>(Sk));
        double m = -INFINITY;
        for (int64_t j = 0; j < Sk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q.get(((b * H + h) * Sq + i) * D + d) *
                   k.get(((b * Hkv + hk) * Sk + j) * D + d);
          dot *= scale;
          if (mask)
            dot += mask->get(broadcastIndex(mask->t.shape, full,
                                            ((b * H + h) * Sq + i) * Sk + j));
          if (causal && j > i + (Sk - Sq))
            dot = -INFINITY;
          s[size_t(j)] = dot;
          m = std::max(m, dot);
        }
        if (m == -INFINITY)
          continue; // fully masked: zeros
        double sum = 0;
        for (double &x : s) {
          x = std::exp(x - m);
          sum += x;
        }
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < Sk; ++j)
            acc +=
                s[size_t(j)] / sum * v.get(((b * Hkv + hk) * Sk + j) * Dv + d);
          out[size_t(((b * H + h) * Sq + i) * Dv + d)] = acc;
        }
      }
    }
  return out;
}

struct AttnCase {
  int64_t B, H, Hkv, Sq, Sk, D, Dv;
  bool causal;
  Shape mask; // empty: no mask
};

const AttnCase kAttnCases[] = {
    {2, 4, 4, 16, 16, 8, 8, true, {}},
    {2, 4, 4, 16, 16, 8, 8, false, {2, 1, 16, 16}},
    {2, 4, 2, 5, 23, 16, 16, true, {}},            // GQA, Sq < Sk (kv cache)
    {1, 6, 1, 100, 130, 32, 24, true, {100, 130}}, // MQA, blocks, Dv != D
    {2, 4, 2, 9, 9, 8, 8, false, {2, 1, 1, 9}},    // padding-style mask
    {1, 2, 2, 20, 12, 8, 8, true, {}},             // Sq > Sk: masked rows
    {2, 2, 1, 1, 40, 16, 16, false, {1}},          // decode step, scalar mask
    {2, 12, 12, 70, 70, 64, 64, true, {2, 1, 70, 70}},
};

TEST(KernelAttention, CausalMaskGqa) {
  uint32_t seed = 800;
  for (const AttnCase &c : kAttnCases) {
    Buf q = randomBuf(DType::F32, {c.B, c.H, c.Sq, c.D}, seed++);
    Buf k = randomBuf(DType::F32, {c.B, c.Hkv, c.Sk, c.D}, seed++);
    Buf v = randomBuf(DType::F32, {c.B, c.Hkv, c.Sk, c.Dv}, seed++);
    Buf mask = randomBuf(DType::F32, c.mask, seed++, -2, 2);
    bool hasMask = !c.mask.empty();
    if (hasMask && mask.n() > 3)
      mask.p<float>()[1] = -INFINITY; // a masked-out key
    Buf out(DType::F32, {c.B, c.H, c.Sq, c.Dv});
    float scale = 1.0f / std::sqrt(float(c.D));
    ASSERT_TRUE(attention(q.t, k.t, v.t, hasMask ? &mask.t : nullptr, scale,
                          c.causal, out.t)
                    .ok);
    expectClose(
        out, refAttention(q, k, v, hasMask ? &mask : nullptr, scale, c.causal),
        kRtol, 2e-6,
        "attention B" + std::to_string(c.B) + " H" + std::to_string(c.H) +
            " Hkv" + std::to_string(c.Hkv) + " Sq" + std::to_string(c.Sq) +
            " Sk" + std::to_string(c.Sk));
  }
}

// Each (batch, head, block of 64 query rows) is one item whose GEMMs (oneDNN's
// where it is the GEMM library, for blocks of 16 rows or more) depend on its
// shape alone: a rank holding half the heads (tensor parallelism) computes
// them bit for bit as one holding all of them.
TEST(KernelAttention, HeadsComputeAlikeWhateverTheirCount) {
  const int64_t B = 2, H = 8, Hkv = 4, S = 130, D = 64;
  Buf q = randomBuf(DType::F32, {B, H, S, D}, 21);
  Buf k = randomBuf(DType::F32, {B, Hkv, S, D}, 22);
  Buf v = randomBuf(DType::F32, {B, Hkv, S, D}, 23);
  Buf out(DType::F32, {B, H, S, D});
  ASSERT_TRUE(attention(q.t, k.t, v.t, nullptr, 0.125f, true, out.t).ok);
  // The first half of the heads of each batch row, and of the key/value
  // heads they read.
  auto half = [&](const Buf &x, int64_t heads) {
    Buf h(DType::F32, {B, heads / 2, S, D});
    const int64_t block = heads / 2 * S * D;
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(x.p<float>() + b * heads * S * D, block,
                  h.p<float>() + b * block);
    return h;
  };
  Buf hq = half(q, H), hk = half(k, Hkv), hv = half(v, Hkv),
      hout = half(out, H);
  Buf got(DType::F32, {B, H / 2, S, D});
  ASSERT_TRUE(attention(hq.t, hk.t, hv.t, nullptr, 0.125f, true, got.t).ok);
  EXPECT_TRUE(
      std::equal(got.p<float>(), got.p<float>() + got.n(), hout.p<float>()))
      << "half the heads differ from the same heads computed among all";
}

TEST(KernelAttention, FullyMaskedRowIsZero) {
  Buf q = randomBuf(DType::F32, {1, 1, 2, 4}, 1),
      k = randomBuf(DType::F32, {1, 1, 3, 4}, 2);
  Buf v = randomBuf(DType::F32, {1, 1, 3, 4}, 3);
  Buf mask = fromValues(DType::F32, {2, 3},
                        {-INFINITY, -INFINITY, -INFINITY, 0, 0, 0});
  Buf out(DType::F32, {1, 1, 2, 4});
  ASSERT_TRUE(attention(q.t, k.t, v.t, &mask.t, 0.5f, false, out.t).ok);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out.p<float>()[i], 0.0f);
  for (int i = 4; i < 8; ++i)
    EXPECT_FALSE(std::isnan(out.p<float>()[i]));
}

//===----------------------------------------------------------------------===//
// errors and threads
//===----------------------------------------------------------------------===//

void expectTypeError(const Status &st, const char *what) {
  EXPECT_FALSE(st.ok) << what;
  EXPECT_NE(st.message.find("unsupported element type"), std::string::npos)
      << what << ": " << st.message;
}

TEST(KernelErrors, UnsupportedElementTypes) {
  Buf h(DType::F16, {2, 2}), ho(DType::F16, {2, 2});
  Buf b(DType::Bool, {2, 2}), bo(DType::Bool, {2, 2});
  Buf d(DType::F64, {2, 2}), dout(DType::F64, {2, 2});
  Buf i8(DType::I8, {2, 2}), i8o(DType::I8, {2});
  Buf i64(DType::I64, {2, 2}), i64o(DType::I64, {2, 2});
  Buf f(DType::F32, {2, 2}), scalar(DType::F64, {});
  expectTypeError(binary(BinaryKind::Add, h.t, h.t, ho.t), "binary f16");
  expectTypeError(binary(BinaryKind::Add, b.t, b.t, bo.t), "binary bool");
  expectTypeError(unary(UnaryKind::Exp, h.t, ho.t), "unary f16");
  expectTypeError(matmul(b.t, b.t, bo.t), "matmul bool");
  expectTypeError(linear(d.t, d.t, nullptr, false, dout.t), "linear f64");
  expectTypeError(layerNorm(d.t, d.t, nullptr, 1, 1e-5f, dout.t),
                  "layerNorm f64");
  expectTypeError(rmsNorm(h.t, h.t, 1e-5f, ho.t), "rmsNorm f16");
  expectTypeError(softmax(i64.t, 1, i64o.t), "softmax i64");
  expectTypeError(reduce(ReduceKind::Sum, i8.t, {1}, i8o.t), "reduce i8");
  Buf q(DType::F64, {1, 1, 2, 2});
  Buf qo(DType::F64, {1, 1, 2, 2});
  expectTypeError(attention(q.t, q.t, q.t, nullptr, 1.0f, false, qo.t),
                  "attention f64");
  expectTypeError(einsum("ij->ji", {&i64.t}, i64o.t), "einsum i64");
  Buf t(DType::I64, {2});
  expectTypeError(crossEntropy(d.t, t.t, scalar.t), "crossEntropy f64");
}

// With OPENBLAS_CORETYPE=Haswell (set on these machines and in CI),
// OpenBLAS's own threading gives results that differ in the last bits
// between thread counts; the kernels tile GEMMs by shape so that they do not.
TEST(KernelThreads, ResultsIndependentOfThreadCount) {
  const int saved = getNumThreads();
  Buf q = randomBuf(DType::F32, {2, 8, 130, 64}, 1);
  Buf k = randomBuf(DType::F32, {2, 4, 130, 64}, 2);
  Buf v = randomBuf(DType::F32, {2, 4, 130, 64}, 3);
  Buf mask = randomBuf(DType::F32, {2, 1, 130, 130}, 4);
  Buf x = randomBuf(DType::F32, {4, 100, 256}, 5);
  Buf w = randomBuf(DType::F32, {384, 256}, 6);
  Buf bias = randomBuf(DType::F32, {384}, 7);
  Buf ma = randomBuf(DType::F32, {3, 300, 96}, 9);
  Buf mb = randomBuf(DType::F32, {3, 96, 600}, 10);
  std::vector<std::vector<float>> attn, lin, plannedLin, plannedGrad, sm, ln,
      mm;
  for (int threads : {1, 2, 4}) {
    setNumThreads(threads);
    EXPECT_EQ(getNumThreads(), threads);
    Buf ao(DType::F32, {2, 8, 130, 64});
    ASSERT_TRUE(attention(q.t, k.t, v.t, &mask.t, 0.125f, true, ao.t).ok);
    attn.emplace_back(ao.p<float>(), ao.p<float>() + ao.n());
    Buf lo(DType::F32, {4, 100, 384});
    ASSERT_TRUE(linear(x.t, w.t, &bias.t, true, lo.t).ok);
    lin.emplace_back(lo.p<float>(), lo.p<float>() + lo.n());
    // As mp-run binds it (oneDNN, packed, where this CPU has AVX-512).
    PlannedKernel planned = planLinear(x.t, w.t, &bias.t, true, lo.t, true);
    if (planned.run) {
      ASSERT_TRUE(planned.run().ok);
      plannedLin.emplace_back(lo.p<float>(), lo.p<float>() + lo.n());
    }
    // A weight gradient reduces over the 400 rows (a train step's longest
    // reduction) with oneDNN, where it is chosen.
    Buf dw(DType::F32, {384, 256});
    PlannedKernel grad = planLinearWeightGrad(x.t, lo.t, true, dw.t);
    if (grad.run) {
      ASSERT_TRUE(grad.run().ok);
      plannedGrad.emplace_back(dw.p<float>(), dw.p<float>() + dw.n());
    }
    Buf mo(DType::F32, {3, 300, 600}); // several output tiles per batch
    ASSERT_TRUE(matmul(ma.t, mb.t, mo.t).ok);
    mm.emplace_back(mo.p<float>(), mo.p<float>() + mo.n());
    Buf so(DType::F32, x.t.shape);
    ASSERT_TRUE(softmax(x.t, 2, so.t).ok);
    sm.emplace_back(so.p<float>(), so.p<float>() + so.n());
    Buf g = randomBuf(DType::F32, {256}, 8);
    ASSERT_TRUE(layerNorm(x.t, g.t, nullptr, 2, 1e-5f, so.t).ok);
    ln.emplace_back(so.p<float>(), so.p<float>() + so.n());
  }
  setNumThreads(saved);
  for (size_t i = 1; i < attn.size(); ++i) {
    EXPECT_EQ(attn[0], attn[i])
        << "attention differs with thread setting " << i;
    EXPECT_EQ(lin[0], lin[i]) << "linear differs with thread setting " << i;
    if (i < plannedLin.size()) {
      EXPECT_EQ(plannedLin[0], plannedLin[i])
          << "planned linear differs with thread setting " << i;
    }
    if (i < plannedGrad.size()) {
      EXPECT_EQ(plannedGrad[0], plannedGrad[i])
          << "planned weight gradient differs with thread setting " << i;
    }
    EXPECT_EQ(mm[0], mm[i]) << "matmul differs with thread setting " << i;
    EXPECT_EQ(sm[0], sm[i]) << "softmax differs with thread setting " << i;
    EXPECT_EQ(ln[0], ln[i]) << "layerNorm differs with thread setting " << i;
  }
}

} // namespace

namespace {

/// Runs `body` with MP_CPU_GEMM=onednn (restoring the environment after);
/// false where the runtime was built without oneDNN.
template <class Body> bool withOneDnn(Body body) {
  const char *saved = std::getenv("MP_CPU_GEMM");
  std::string old = saved ? saved : "";
  setenv("MP_CPU_GEMM", "onednn", 1);
  const bool built = describeCpu().find("without oneDNN") == std::string::npos;
  if (built)
    body();
  if (saved)
    setenv("MP_CPU_GEMM", old.c_str(), 1);
  else
    unsetenv("MP_CPU_GEMM");
  return built;
}

} // namespace

// The oneDNN plans (lib/Runtime/cpu/Dnnl.h): in place and packed, with bias
// and transposed weights; a packed weight that changed is read again after
// `refresh`.
TEST(KernelLinear, OneDnnPlansMatchTheReference) {
  bool built = withOneDnn([] {
    uint32_t seed = 900;
    for (Shape xs : {Shape{5, 8}, Shape{2, 33, 64}})
      for (bool transposed : {false, true})
        for (bool pack : {false, true}) {
          const std::string what = formatShape(xs) + (transposed ? " T" : "") +
                                   (pack ? " packed" : "");
          auto [x, w, bias, out] = linearOperands(xs, transposed, seed);
          PlannedKernel plan =
              planLinear(x.t, w.t, &bias.t, transposed, out.t, pack);
          ASSERT_TRUE(bool(plan.run)) << what;
          EXPECT_EQ(bool(plan.refresh), plan.packedBytes > 0) << what;
          ASSERT_TRUE(plan.run().ok) << what;
          expectClose(out, refLinear(x, w, &bias, transposed), kRtol, 1e-5,
                      what);
          Buf changed = randomBuf(DType::F32, w.t.shape, seed++);
          std::copy(changed.p<float>(), changed.p<float>() + changed.n(),
                    w.p<float>());
          if (plan.refresh) {
            ASSERT_TRUE(plan.refresh().ok) << what;
          }
          ASSERT_TRUE(plan.run().ok) << what;
          expectClose(out, refLinear(x, w, &bias, transposed), kRtol, 1e-5,
                      what + " after the weight changed");
        }
  });
  if (!built)
    GTEST_SKIP() << "this runtime was built without oneDNN";
}

TEST(KernelLinear, OneDnnWeightGradMatchesOpenBlas) {
  bool built = withOneDnn([] {
    Buf x = randomBuf(DType::F32, {3, 40, 24}, 950);
    Buf dy = randomBuf(DType::F32, {3, 40, 56}, 951);
    for (bool transposed : {false, true}) {
      Shape ws = transposed ? Shape{56, 24} : Shape{24, 56};
      Buf viaBlas(DType::F32, ws), viaDnnl(DType::F32, ws);
      ASSERT_TRUE(linearWeightGrad(x.t, dy.t, transposed, viaBlas.t).ok);
      PlannedKernel plan =
          planLinearWeightGrad(x.t, dy.t, transposed, viaDnnl.t);
      ASSERT_TRUE(bool(plan.run));
      ASSERT_TRUE(plan.run().ok);
      std::vector<double> expected(viaBlas.p<float>(),
                                   viaBlas.p<float>() + viaBlas.n());
      expectClose(viaDnnl, expected, 1e-5, 1e-5,
                  transposed ? "dW (transposed)" : "dW");
    }
  });
  if (!built)
    GTEST_SKIP() << "this runtime was built without oneDNN";
}
