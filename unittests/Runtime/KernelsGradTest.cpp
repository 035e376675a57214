//===- KernelsGradTest.cpp - gradient kernels vs finite differences -------===//
//
// Each gradient kernel against central finite differences of its forward
// kernel: for L(x) = Σ w·f(x) with random w (the result's gradient), the
// kernel's operand gradient must match (L(x + h) − L(x − h)) / 2h. The
// forward kernels are fp32, so h = 1e-2 and the tolerance is 1e-2 relative
// plus 2e-3 of the largest gradient (truncation O(h²), rounding O(ε/h)).
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

#include "mp/Runtime/Kernels.h"

#include <cmath>
#include <functional>
#include <limits>

namespace mp::rt::test {
namespace {

double dot(const Buf &a, const Buf &b) {
  double s = 0;
  for (int64_t i = 0; i < a.n(); ++i)
    s += a.get(i) * b.get(i);
  return s;
}

/// d(Σ w·out)/dx by central differences, `forward` recomputing `out`.
std::vector<double> numericGrad(Buf &x, const std::function<void()> &forward,
                                const Buf &out, const Buf &w, double h = 1e-2) {
  std::vector<double> g(static_cast<size_t>(x.n()));
  for (int64_t i = 0; i < x.n(); ++i) {
    const double xi = x.get(i);
    x.set(i, xi + h);
    forward();
    const double plus = dot(out, w);
    x.set(i, xi - h);
    forward();
    const double minus = dot(out, w);
    x.set(i, xi);
    g[size_t(i)] = (plus - minus) / (2 * h);
  }
  forward();
  return g;
}

void expectGrad(const Buf &got, const std::vector<double> &numeric,
                const std::string &what) {
  double scale = 0;
  for (double v : numeric)
    scale = std::max(scale, std::fabs(v));
  expectClose(got, numeric, 1e-2, 2e-3 * scale, what);
}

TEST(KernelGrad, LinearWeightMatchesFiniteDifferences) {
  for (bool transposed : {false, true}) {
    Buf x = randomBuf(DType::F32, {2, 3, 4}, 1);
    Buf w = randomBuf(DType::F32, transposed ? Shape{5, 4} : Shape{4, 5}, 2);
    Buf y(DType::F32, {2, 3, 5}), dy = randomBuf(DType::F32, {2, 3, 5}, 3);
    auto forward = [&] {
      ASSERT_TRUE(linear(x.t, w.t, nullptr, transposed, y.t).ok);
    };
    std::vector<double> numeric = numericGrad(w, forward, y, dy);
    Buf dw(DType::F32, w.t.shape);
    ASSERT_TRUE(linearWeightGrad(x.t, dy.t, transposed, dw.t).ok);
    expectGrad(dw, numeric, transposed ? "dW (transposed)" : "dW");
  }
}

TEST(KernelGrad, LayerNormMatchesFiniteDifferences) {
  // Normalized over the trailing two dims (axis 1 of [3, 2, 4]).
  Buf x = randomBuf(DType::F32, {3, 2, 4}, 4, -2, 2);
  Buf scale = randomBuf(DType::F32, {2, 4}, 5, 0.5, 1.5);
  Buf y(DType::F32, {3, 2, 4}), dy = randomBuf(DType::F32, {3, 2, 4}, 6);
  auto forward = [&] {
    ASSERT_TRUE(layerNorm(x.t, scale.t, nullptr, 1, 1e-5f, y.t).ok);
  };
  std::vector<double> dxNumeric = numericGrad(x, forward, y, dy);
  std::vector<double> dsNumeric = numericGrad(scale, forward, y, dy);
  Buf dx(DType::F32, x.t.shape), ds(DType::F32, scale.t.shape);
  ASSERT_TRUE(layerNormGrad(x.t, scale.t, dy.t, 1, 1e-5f, dx.t, ds.t).ok);
  expectGrad(dx, dxNumeric, "layer norm dx");
  expectGrad(ds, dsNumeric, "layer norm dscale");
}

TEST(KernelGrad, RMSNormMatchesFiniteDifferences) {
  Buf x = randomBuf(DType::F32, {5, 6}, 7, -2, 2);
  Buf scale = randomBuf(DType::F32, {6}, 8, 0.5, 1.5);
  Buf y(DType::F32, {5, 6}), dy = randomBuf(DType::F32, {5, 6}, 9);
  auto forward = [&] { ASSERT_TRUE(rmsNorm(x.t, scale.t, 1e-6f, y.t).ok); };
  std::vector<double> dxNumeric = numericGrad(x, forward, y, dy);
  std::vector<double> dsNumeric = numericGrad(scale, forward, y, dy);
  Buf dx(DType::F32, x.t.shape), ds(DType::F32, scale.t.shape);
  ASSERT_TRUE(rmsNormGrad(x.t, scale.t, dy.t, 1e-6f, dx.t, ds.t).ok);
  expectGrad(dx, dxNumeric, "rms norm dx");
  expectGrad(ds, dsNumeric, "rms norm dscale");
}

TEST(KernelGrad, GeluBothFormsMatchFiniteDifferences) {
  for (bool tanhForm : {false, true}) {
    Buf x = randomBuf(DType::F32, {40}, 10, -4, 4);
    Buf y(DType::F32, {40}), dy = randomBuf(DType::F32, {40}, 11);
    auto forward = [&] {
      ASSERT_TRUE(
          unary(tanhForm ? UnaryKind::GeluTanh : UnaryKind::Gelu, x.t, y.t).ok);
    };
    std::vector<double> numeric = numericGrad(x, forward, y, dy, 1e-3);
    Buf dx(DType::F32, {40});
    ASSERT_TRUE(geluGrad(x.t, dy.t, tanhForm, dx.t).ok);
    expectGrad(dx, numeric, tanhForm ? "gelu (tanh) dx" : "gelu dx");
  }
}

TEST(KernelGrad, GeluGradientsMatchTheDoubleFormulasEverywhere) {
  // Dense in [-12, 12], then the tails, huge values, the infinities, NaN.
  std::vector<float> xs;
  for (int i = -24000; i <= 24000; ++i)
    xs.push_back(i * 5e-4f);
  for (float v : {-1e30f, -1e10f, -100.0f, -20.0f, -15.5f, 15.5f, 20.0f, 100.0f,
                  1e10f, 1e30f, 1e-40f, -1e-40f})
    xs.push_back(v);
  const float inf = std::numeric_limits<float>::infinity();
  xs.push_back(inf);
  xs.push_back(-inf);
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> ones(xs.size(), 1.0f), dx(xs.size());
  Tensor x{xs.data(), DType::F32, {n}}, dy{ones.data(), DType::F32, {n}};
  Tensor out{dx.data(), DType::F32, {n}};
  for (bool tanhForm : {false, true}) {
    ASSERT_TRUE(geluGrad(x, dy, tanhForm, out).ok);
    for (int64_t i = 0; i < n; ++i) {
      const double v = xs[i];
      double want;
      if (std::isnan(v))
        want = v;
      else if (std::isinf(v))
        want = v > 0 ? 1.0 : 0.0;
      else if (tanhForm) {
        const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
        const double w = std::max(-30.0, std::min(30.0, v));
        const double t = std::tanh(c * (w + k * w * w * w));
        want = 0.5 * (1 + t) + 0.5 * w * (1 - t * t) * c * (1 + 3 * k * w * w);
      } else {
        want = 0.5 * std::erfc(-v / std::sqrt(2.0)) +
               (std::fabs(v) > 40
                    ? 0.0
                    : v * std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI));
      }
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(dx[i])) << "x = " << v;
        continue;
      }
      ASSERT_NEAR(dx[i], want, 1e-6 + 2e-6 * std::fabs(want))
          << (tanhForm ? "tanh" : "erf") << " form at x = " << v;
    }
  }
}

TEST(KernelGrad, CausalGroupedQueryAttentionMatchesFiniteDifferences) {
  // 4 query heads over 2 kv heads, 3 queries aligned at the end of 5 keys,
  // an additive mask broadcast over heads; one fully masked row of scores
  // would give zeros (not covered by differences), so the mask is finite.
  const Shape qs{2, 4, 3, 4}, ks{2, 2, 5, 4};
  Buf q = randomBuf(DType::F32, qs, 12), k = randomBuf(DType::F32, ks, 13);
  Buf v = randomBuf(DType::F32, ks, 14);
  Buf mask = randomBuf(DType::F32, {2, 1, 3, 5}, 15, -1, 0);
  Buf out(DType::F32, qs), dout = randomBuf(DType::F32, qs, 16);
  const float scale = 0.5f;
  auto forward = [&] {
    ASSERT_TRUE(attention(q.t, k.t, v.t, &mask.t, scale, true, out.t).ok);
  };
  std::vector<double> dqNumeric = numericGrad(q, forward, out, dout);
  std::vector<double> dkNumeric = numericGrad(k, forward, out, dout);
  std::vector<double> dvNumeric = numericGrad(v, forward, out, dout);
  Buf dq(DType::F32, qs), dk(DType::F32, ks), dv(DType::F32, ks);
  ASSERT_TRUE(attentionGrad(q.t, k.t, v.t, &mask.t, out.t, dout.t, scale, true,
                            dq.t, dk.t, dv.t)
                  .ok);
  expectGrad(dq, dqNumeric, "attention dq");
  expectGrad(dk, dkNumeric, "attention dk");
  expectGrad(dv, dvNumeric, "attention dv");
}

/// dq, dk and dv of causal attention (no mask) in double, from the
/// softmax's formulas: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ∘ (dP − Σ dO∘O),
/// dQ = scale·dS·K, dK = scale·dSᵀ·Q, each kv head summing its group's.
void refAttentionGrad(const Buf &q, const Buf &k, const Buf &v, const Buf &dout,
                      double scale, std::vector<double> &dq,
                      std::vector<double> &dk, std::vector<double> &dv) {
  const int64_t B = q.t.shape[0], H = q.t.shape[1], Sq = q.t.shape[2],
                D = q.t.shape[3], Hkv = k.t.shape[1], Sk = k.t.shape[2];
  dq.assign(size_t(q.n()), 0);
  dk.assign(size_t(k.n()), 0);
  dv.assign(size_t(v.n()), 0);
  auto at = [](int64_t bh, int64_t i, int64_t S, int64_t d, int64_t D) {
    return size_t((bh * S + i) * D + d);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bq = b * H + h, bk = b * Hkv + h / (H / Hkv);
      for (int64_t i = 0; i < Sq; ++i) {
        const int64_t keys = std::min(Sk, i + (Sk - Sq) + 1);
        std::vector<double> p(static_cast<size_t>(keys)),
            dp(static_cast<size_t>(keys));
        double m = -INFINITY, sum = 0, rowDot = 0;
        for (int64_t j = 0; j < keys; ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += q.get(at(bq, i, Sq, d, D)) * k.get(at(bk, j, Sk, d, D));
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        for (double &x : p)
          sum += (x = std::exp(x - m));
        std::vector<double> o(size_t(D), 0);
        for (int64_t j = 0; j < keys; ++j) {
          p[size_t(j)] /= sum;
          for (int64_t d = 0; d < D; ++d)
            o[size_t(d)] += p[size_t(j)] * v.get(at(bk, j, Sk, d, D));
        }
        for (int64_t d = 0; d < D; ++d)
          rowDot += dout.get(at(bq, i, Sq, d, D)) * o[size_t(d)];
        for (int64_t j = 0; j < keys; ++j) {
          for (int64_t d = 0; d < D; ++d) {
            const double g = dout.get(at(bq, i, Sq, d, D));
            dv[at(bk, j, Sk, d, D)] += p[size_t(j)] * g;
            dp[size_t(j)] += g * v.get(at(bk, j, Sk, d, D));
          }
          const double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot);
          for (int64_t d = 0; d < D; ++d) {
            dq[at(bq, i, Sq, d, D)] += scale * ds * k.get(at(bk, j, Sk, d, D));
            dk[at(bk, j, Sk, d, D)] += scale * ds * q.get(at(bq, i, Sq, d, D));
          }
        }
      }
    }
}

// Blocks of 16 rows and more, whose GEMMs are oneDNN's where it is the GEMM
// library (the finite-difference test above has 3 rows), against the
// double formulas, and bitwise alike on 1 and 2 threads.
TEST(KernelGrad, AttentionOnLargeBlocksMatchesTheDoubleFormulas) {
  const Shape qs{1, 4, 80, 32}, ks{1, 2, 96, 32};
  Buf q = randomBuf(DType::F32, qs, 31), k = randomBuf(DType::F32, ks, 32);
  Buf v = randomBuf(DType::F32, ks, 33), dout = randomBuf(DType::F32, qs, 34);
  const float scale = 0.25f;
  Buf out(DType::F32, qs);
  ASSERT_TRUE(attention(q.t, k.t, v.t, nullptr, scale, true, out.t).ok);
  std::vector<double> dqRef, dkRef, dvRef;
  refAttentionGrad(q, k, v, dout, scale, dqRef, dkRef, dvRef);
  const int saved = getNumThreads();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2}) {
    setNumThreads(threads);
    Buf dq(DType::F32, qs), dk(DType::F32, ks), dv(DType::F32, ks);
    ASSERT_TRUE(attentionGrad(q.t, k.t, v.t, nullptr, out.t, dout.t, scale,
                              true, dq.t, dk.t, dv.t)
                    .ok);
    expectClose(dq, dqRef, 1e-4, 1e-5, "attention dq");
    expectClose(dk, dkRef, 1e-4, 1e-5, "attention dk");
    expectClose(dv, dvRef, 1e-4, 1e-5, "attention dv");
    runs.emplace_back(dq.p<float>(), dq.p<float>() + dq.n());
    runs.back().insert(runs.back().end(), dk.p<float>(),
                       dk.p<float>() + dk.n());
    runs.back().insert(runs.back().end(), dv.p<float>(),
                       dv.p<float>() + dv.n());
  }
  setNumThreads(saved);
  EXPECT_EQ(runs[0], runs[1]) << "attention gradients differ between 1 and 2 "
                                 "threads";
}

TEST(KernelGrad, CrossEntropyIgnoresTargetsOfMinus100) {
  Buf logits = randomBuf(DType::F32, {2, 3, 7}, 17, -3, 3);
  Buf targets = fromValues(DType::I64, {2, 3}, {1, -100, 6, 0, 3, -100});
  Buf loss(DType::F32, {}), dloss = fromValues(DType::F32, {}, {0.7});
  auto forward = [&] {
    ASSERT_TRUE(crossEntropy(logits.t, targets.t, loss.t).ok);
  };
  std::vector<double> numeric = numericGrad(logits, forward, loss, dloss);
  Buf dlogits(DType::F32, logits.t.shape);
  ASSERT_TRUE(crossEntropyGrad(logits.t, targets.t, dloss.t, dlogits.t).ok);
  expectGrad(dlogits, numeric, "cross-entropy dlogits");
  // The ignored positions' rows are exactly zero, and the loss is the mean
  // over the 4 counted targets.
  for (int64_t j = 0; j < 7; ++j) {
    EXPECT_EQ(dlogits.get(1 * 7 + j), 0.0);
    EXPECT_EQ(dlogits.get(5 * 7 + j), 0.0);
  }
  Buf all =
      fromValues(DType::I64, {2, 3}, {-100, -100, -100, -100, -100, -100});
  ASSERT_TRUE(crossEntropy(logits.t, all.t, loss.t).ok);
  EXPECT_TRUE(std::isnan(loss.get(0))) << "PyTorch's mean over no targets";
}

TEST(KernelGrad, EmbeddingSumsRowsByIdAndKeepsItsVocabSlice) {
  Buf ids = fromValues(DType::I64, {2, 3}, {1, 3, 1, -1, 0, 2});
  Buf dy = randomBuf(DType::F32, {2, 3, 2}, 18);
  Buf table = randomBuf(DType::F32, {4, 2}, 19), y(DType::F32, {2, 3, 2});
  auto forward = [&] { ASSERT_TRUE(gather(table.t, ids.t, 0, y.t).ok); };
  std::vector<double> numeric = numericGrad(table, forward, y, dy);
  Buf dt(DType::F32, {4, 2});
  ASSERT_TRUE(embeddingGrad(ids.t, dy.t, 0, 4, dt.t).ok);
  expectGrad(dt, numeric, "embedding dtable");
  // Vocab-parallel: the rank holding rows [2, 4) of the 4-row table sees
  // ids 3, -1 (= 3) and 2 only.
  Buf local(DType::F32, {2, 2});
  ASSERT_TRUE(embeddingGrad(ids.t, dy.t, 2, 4, local.t).ok);
  expectClose(local, {numeric[4], numeric[5], numeric[6], numeric[7]}, 1e-5,
              1e-6, "vocab-parallel slice");
}

TEST(KernelGrad, SlicePlacesTheGradientWhereTheSliceRead) {
  Buf x = randomBuf(DType::F32, {3, 6}, 20);
  Buf y(DType::F32, {2, 3}), dy = randomBuf(DType::F32, {2, 3}, 21);
  const std::vector<int64_t> starts{2, 5}, strides{-1, -2};
  auto forward = [&] { ASSERT_TRUE(slice(x.t, starts, strides, y.t).ok); };
  std::vector<double> numeric = numericGrad(x, forward, y, dy);
  Buf dx(DType::F32, {3, 6});
  ASSERT_TRUE(sliceGrad(dy.t, starts, strides, dx.t).ok);
  expectGrad(dx, numeric, "slice dx");
}

TEST(KernelGrad, DropoutKeepsAndScalesByItsKeyAlone) {
  const int64_t n = 20000;
  Buf x(DType::F32, {n}), a(DType::F32, {n}), b(DType::F32, {n}),
      c(DType::F32, {n});
  for (int64_t i = 0; i < n; ++i)
    x.set(i, 1.0 + i % 7);
  const uint64_t key = dropoutKey(1234, 3, 2, 0);
  ASSERT_TRUE(dropout(x.t, 0.25f, key, a.t).ok);
  ASSERT_TRUE(dropout(x.t, 0.25f, key, b.t).ok);
  ASSERT_TRUE(dropout(x.t, 0.25f, dropoutKey(1234, 4, 2, 0), c.t).ok);
  int64_t dropped = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.get(i), b.get(i)) << "the same key gives the same mask";
    if (a.get(i) == 0)
      ++dropped;
    else
      ASSERT_FLOAT_EQ(a.get(i), x.get(i) / 0.75) << "kept values are scaled";
    differ += (a.get(i) == 0) != (c.get(i) == 0);
  }
  // 25% dropped, within 5 standard deviations (sqrt(n p (1 - p)) = 61).
  EXPECT_NEAR(dropped, n / 4, 5 * 61);
  EXPECT_GT(differ, n / 4) << "another step draws another mask";
  // Each rank's own stream differs from the shared one.
  EXPECT_NE(dropoutKey(1234, 3, 2, 0), dropoutKey(1234, 3, 2, 1));
}

} // namespace
} // namespace mp::rt::test
