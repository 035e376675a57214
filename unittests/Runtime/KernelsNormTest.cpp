//===- KernelsNormTest.cpp - CPU norms, softmax and reductions
//--------------===//
//
// Checked against references written here in double precision; see
// KernelTestUtil.h.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace mp::rt;
using namespace mp::rt::cpu;
using namespace mp::rt::test;

namespace {

/// Layer norm in double of each row of `inner` values of `x`:
/// (x − mean) / sqrt(var + eps) · scale(i) + bias(i).
template <class Scale, class Bias>
std::vector<double> layerNormReference(const Buf &x, int64_t inner, double eps,
                                       Scale scale, Bias bias) {
  std::vector<double> ref(static_cast<size_t>(x.n()));
  for (int64_t r = 0; r < x.n() / inner; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i)
      mean += x.get(r * inner + i);
    mean /= double(inner);
    for (int64_t i = 0; i < inner; ++i)
      var += std::pow(x.get(r * inner + i) - mean, 2);
    var /= double(inner);
    for (int64_t i = 0; i < inner; ++i)
      ref[size_t(r * inner + i)] =
          (x.get(r * inner + i) - mean) / std::sqrt(var + eps) * scale(i) +
          bias(i);
  }
  return ref;
}

//===----------------------------------------------------------------------===//
// norms, softmax, reduce
//===----------------------------------------------------------------------===//

TEST(KernelLayerNorm, LastAxisAndTrailingTwo) {
  uint32_t seed = 500;
  struct Case {
    Shape x;
    int64_t axis;
  };
  for (Case c : {Case{{3, 7, 16}, 2}, Case{{2, 3, 4, 5}, 2}, Case{{64, 768}, 1},
                 Case{{5, 9}, 0}})
    for (bool withBias : {false, true}) {
      Buf x = randomBuf(DType::F32, c.x, seed++, -3, 5);
      Shape ns(c.x.begin() + c.axis, c.x.end());
      Buf g = randomBuf(DType::F32, ns, seed++),
          b = randomBuf(DType::F32, ns, seed++);
      Buf out(DType::F32, c.x);
      const float eps = 1e-5f;
      ASSERT_TRUE(
          layerNorm(x.t, g.t, withBias ? &b.t : nullptr, c.axis, eps, out.t)
              .ok);
      std::vector<double> ref = layerNormReference(
          x, numelOf(ns), eps, [&](int64_t i) { return g.get(i); },
          [&](int64_t i) { return withBias ? b.get(i) : 0.0; });
      expectClose(out, ref, kRtol, 1e-6, formatShape(c.x));
    }
}

// Rows whose mean is about 10^6 of their standard deviations: statistics
// taken as Σx² − n·mean² would lose 10^-3 of the variance to cancellation
// (the one-pass kernels take them about the row's first value instead).
TEST(KernelLayerNorm, RowsFarFromZero) {
  const int64_t rows = 4, n = 4096;
  Buf x = randomBuf(DType::F32, {rows, n}, 570, -0.17, 0.17);
  for (int64_t i = 0; i < x.n(); ++i)
    x.p<float>()[i] += 1e5f;
  Buf g(DType::F32, {n}), out(DType::F32, {rows, n});
  std::fill(g.p<float>(), g.p<float>() + n, 1.0f);
  ASSERT_TRUE(layerNorm(x.t, g.t, nullptr, 1, 1e-12f, out.t).ok);
  std::vector<double> ref = layerNormReference(
      x, n, 0.0, [](int64_t) { return 1.0; }, [](int64_t) { return 0.0; });
  expectClose(out, ref, 1e-5, 1e-5, "rows far from zero");
}

TEST(KernelRmsNorm, LastAxis) {
  uint32_t seed = 550;
  for (Shape s : {Shape{3, 7, 16}, Shape{40, 1024}}) {
    Buf x = randomBuf(DType::F32, s, seed++, -2, 3);
    Buf g = randomBuf(DType::F32, {s.back()}, seed++);
    Buf out(DType::F32, s);
    ASSERT_TRUE(rmsNorm(x.t, g.t, 1e-6f, out.t).ok);
    int64_t inner = s.back();
    std::vector<double> ref(static_cast<size_t>(x.n()));
    for (int64_t r = 0; r < x.n() / inner; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < inner; ++i)
        ms += std::pow(x.get(r * inner + i), 2);
      ms /= double(inner);
      for (int64_t i = 0; i < inner; ++i)
        ref[size_t(r * inner + i)] =
            x.get(r * inner + i) / std::sqrt(ms + 1e-6) * g.get(i);
    }
    expectClose(out, ref, kRtol, 1e-6, formatShape(s));
  }
}

/// Whether two f32 buffers hold bitwise the same values.
bool sameBits(const Buf &a, const Buf &b) { return a.mem == b.mem; }

// The fused residual norms give bitwise what the add and then the norm give
// (mp-fuse-residual-norms must not change a program's results), on shapes
// that run in one thread and on ones that run in parallel, in place too
// (the sum written over the left operand).
TEST(KernelAddNorm, BitwiseTheAddThenTheNorm) {
  uint32_t seed = 580;
  struct Case {
    Shape x;
    int64_t axis;
  };
  for (Case c : {Case{{3, 7, 16}, 2}, Case{{2, 3, 4, 5}, 2},
                 Case{{4, 128, 768}, 2}, Case{{5, 9}, 0}})
    for (bool layer : {true, false}) {
      if (!layer && c.axis != int64_t(c.x.size()) - 1)
        continue;
      Buf a = randomBuf(DType::F32, c.x, seed++, -3, 5);
      Buf b = randomBuf(DType::F32, c.x, seed++, -2, 2);
      Shape ns(c.x.begin() + c.axis, c.x.end());
      Buf g = randomBuf(DType::F32, ns, seed++),
          bias = randomBuf(DType::F32, ns, seed++);
      const float eps = 1e-5f;
      Buf sum(DType::F32, c.x), out(DType::F32, c.x);
      Buf refSum(DType::F32, c.x), refOut(DType::F32, c.x);
      ASSERT_TRUE(binary(BinaryKind::Add, a.t, b.t, refSum.t).ok);
      if (layer) {
        ASSERT_TRUE(
            layerNorm(refSum.t, g.t, &bias.t, c.axis, eps, refOut.t).ok);
        ASSERT_TRUE(
            addLayerNorm(a.t, b.t, g.t, &bias.t, c.axis, eps, sum.t, out.t).ok);
      } else {
        ASSERT_TRUE(rmsNorm(refSum.t, g.t, eps, refOut.t).ok);
        ASSERT_TRUE(addRmsNorm(a.t, b.t, g.t, eps, sum.t, out.t).ok);
      }
      const std::string what = formatShape(c.x) + (layer ? " layer" : " rms");
      EXPECT_TRUE(sameBits(sum, refSum)) << what;
      EXPECT_TRUE(sameBits(out, refOut)) << what;
      // In place, as the memory plan places it: the sum over the left
      // operand and the norm over the right one.
      ASSERT_TRUE(
          (layer ? addLayerNorm(a.t, b.t, g.t, &bias.t, c.axis, eps, a.t, b.t)
                 : addRmsNorm(a.t, b.t, g.t, eps, a.t, b.t))
              .ok);
      EXPECT_TRUE(sameBits(a, refSum)) << what << " in place";
      EXPECT_TRUE(sameBits(b, refOut)) << what << " in place";
      // One operand read twice: x + x.
      Buf twice(DType::F32, c.x), refTwice(DType::F32, c.x);
      ASSERT_TRUE(binary(BinaryKind::Add, a.t, a.t, refSum.t).ok);
      ASSERT_TRUE(
          (layer ? layerNorm(refSum.t, g.t, &bias.t, c.axis, eps, refTwice.t)
                 : rmsNorm(refSum.t, g.t, eps, refTwice.t))
              .ok);
      ASSERT_TRUE((layer ? addLayerNorm(a.t, a.t, g.t, &bias.t, c.axis, eps,
                                        sum.t, twice.t)
                         : addRmsNorm(a.t, a.t, g.t, eps, sum.t, twice.t))
                      .ok);
      EXPECT_TRUE(sameBits(sum, refSum)) << what << " x + x";
      EXPECT_TRUE(sameBits(twice, refTwice)) << what << " x + x";
    }
}

// A row with an infinity: RMS norm gives the finite entries 0 (they are
// divided by sqrt(inf)), as PyTorch does, fused or not.
TEST(KernelAddNorm, RmsOfARowWithAnInfinity) {
  Buf a(DType::F32, {1, 4}), b(DType::F32, {1, 4}), g(DType::F32, {4});
  const float row[4] = {-1.0f, INFINITY, 2.0f, 3.0f};
  std::copy(row, row + 4, a.p<float>());
  std::fill(g.p<float>(), g.p<float>() + 4, 1.0f);
  Buf sum(DType::F32, {1, 4}), out(DType::F32, {1, 4}),
      alone(DType::F32, {1, 4});
  ASSERT_TRUE(addRmsNorm(a.t, b.t, g.t, 1e-6f, sum.t, out.t).ok);
  ASSERT_TRUE(rmsNorm(a.t, g.t, 1e-6f, alone.t).ok);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(out.p<float>()[i], 0.0f) << i;
    EXPECT_EQ(alone.p<float>()[i], 0.0f) << i;
  }
}

TEST(KernelAddNorm, RefusesOtherTypes) {
  Buf a(DType::F64, {2, 4}), g(DType::F32, {4}), o(DType::F32, {2, 4});
  Status s = addRmsNorm(a.t, a.t, g.t, 1e-5f, o.t, o.t);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.message.find("addRmsNorm"), std::string::npos) << s.message;
}

std::vector<double> refSoftmax(const Buf &x, int64_t axis) {
  const Shape &s = x.t.shape;
  int64_t n = s[size_t(axis)], inner = 1;
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d)
    inner *= s[d];
  int64_t outer = x.n() / (n * inner);
  std::vector<double> ref(static_cast<size_t>(x.n()));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double m = -INFINITY, sum = 0;
      for (int64_t i = 0; i < n; ++i)
        m = std::max(m, x.get((o * n + i) * inner + j));
      for (int64_t i = 0; i < n; ++i)
        sum += std::exp(x.get((o * n + i) * inner + j) - m);
      for (int64_t i = 0; i < n; ++i)
        ref[size_t((o * n + i) * inner + j)] =
            std::exp(x.get((o * n + i) * inner + j) - m) / sum;
    }
  return ref;
}

TEST(KernelSoftmax, LastAndMiddleAxes) {
  uint32_t seed = 600;
  struct Case {
    Shape s;
    int64_t axis;
  };
  for (Case c : {Case{{4, 9, 33}, 2}, Case{{4, 9, 33}, 1}, Case{{4, 9, 33}, 0},
                 Case{{3, 7, 300}, 1}, Case{{2, 50, 400}, 2},
                 Case{{64, 600}, 1}, Case{{2, 40, 600}, 1}})
    for (DType dt : {DType::F32, DType::F64}) {
      Buf x = randomBuf(dt, c.s, seed++, -8, 8);
      Buf out(dt, c.s);
      ASSERT_TRUE(softmax(x.t, c.axis, out.t).ok);
      expectClose(out, refSoftmax(x, c.axis), dt == DType::F32 ? kRtol : 1e-12,
                  1e-9, formatShape(c.s) + " axis " + std::to_string(c.axis));
    }
  // A fully masked row gives zeros (not NaN); -inf entries give 0.
  Buf x = fromValues(DType::F32, {2, 3},
                     {-INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, 0});
  Buf out(DType::F32, {2, 3});
  ASSERT_TRUE(softmax(x.t, 1, out.t).ok);
  expectExact(out, {0, 0, 0, 0.5, 0, 0.5});
  // The same along a middle axis (the strided path), and a NaN makes its
  // whole row NaN on both paths (the CUDA kernels do the same).
  for (DType dt : {DType::F32, DType::F64}) {
    Buf t =
        fromValues(dt, {3, 2}, {-INFINITY, 0, -INFINITY, NAN, -INFINITY, 0});
    Buf tOut(dt, {3, 2});
    ASSERT_TRUE(softmax(t.t, 0, tOut.t).ok);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(tOut.get(2 * i), 0.0) << dtypeName(dt) << " row " << i;
      EXPECT_TRUE(std::isnan(tOut.get(2 * i + 1)))
          << dtypeName(dt) << " row " << i;
    }
    Buf r = fromValues(dt, {1, 3}, {1, NAN, 2});
    Buf rOut(dt, {1, 3});
    ASSERT_TRUE(softmax(r.t, 1, rOut.t).ok);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_TRUE(std::isnan(rOut.get(i))) << dtypeName(dt) << " element " << i;
  }
}

TEST(KernelReduce, EveryKindSeveralAxes) {
  const ReduceKind kinds[] = {ReduceKind::Sum, ReduceKind::Mean,
                              ReduceKind::Max, ReduceKind::Min};
  const std::vector<std::vector<int64_t>> axesList = {
      {0}, {1}, {2}, {3}, {0, 2}, {1, 2}, {1, 3}, {0, 1, 2, 3}, {2, 3}, {0, 3}};
  uint32_t seed = 700;
  for (Shape s : {Shape{3, 4, 5, 6}, Shape{2, 1, 7, 3}, Shape{40, 3, 50, 9}})
    for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32})
      for (ReduceKind k : kinds)
        for (const auto &axes : axesList) {
          bool isInt = dt == DType::I64 || dt == DType::I32;
          Buf x = randomBuf(dt, s, seed++, isInt ? -50 : -1, isInt ? 50 : 1);
          Shape os;
          for (size_t d = 0; d < s.size(); ++d)
            if (std::find(axes.begin(), axes.end(), int64_t(d)) == axes.end())
              os.push_back(s[d]);
          Buf out(dt, os);
          ASSERT_TRUE(reduce(k, x.t, axes, out.t).ok);
          // Reference: accumulate per output element.
          std::vector<double> acc(static_cast<size_t>(numelOf(os)), 0);
          std::vector<int64_t> cnt(static_cast<size_t>(numelOf(os)), 0);
          std::vector<bool> isReduced(s.size(), false);
          for (int64_t a : axes)
            isReduced[size_t(a)] = true;
          for (int64_t i = 0; i < x.n(); ++i) {
            int64_t rem = i, oi = 0, ost = 1;
            for (size_t d = s.size(); d-- > 0;) {
              int64_t c = rem % s[d];
              rem /= s[d];
              if (!isReduced[d]) {
                oi += c * ost;
                ost *= s[d];
              }
            }
            size_t o = size_t(oi);
            double v = x.get(i);
            if (cnt[o]++ == 0)
              acc[o] = v;
            else if (k == ReduceKind::Max)
              acc[o] = std::max(acc[o], v);
            else if (k == ReduceKind::Min)
              acc[o] = std::min(acc[o], v);
            else
              acc[o] += v;
          }
          if (k == ReduceKind::Mean)
            for (size_t o = 0; o < acc.size(); ++o)
              acc[o] = isInt ? std::trunc(acc[o] / double(cnt[o]))
                             : acc[o] / double(cnt[o]);
          expectClose(out, acc, dt == DType::F32 ? kRtol : 1e-12,
                      dt == DType::F32 ? 1e-6 : 1e-12,
                      formatShape(s) + " " + dtypeName(dt) + " kind " +
                          std::to_string(int(k)) + " axes " +
                          std::to_string(axes.size()) + "@" +
                          std::to_string(axes[0]));
        }
}

} // namespace
