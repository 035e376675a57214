//===- KernelsTest.cpp - CPU kernels against naive references -------------===//
//
// Every kernel is checked against a plain nested-loop reference written here
// in double precision (independent of the kernel code), on random inputs from
// fixed seeds. f32 results must match within 1e-5 relative (plus a small
// absolute term where the reference sums many products).
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

using namespace mp::rt;
using namespace mp::rt::cpu;

namespace {

using Shape = std::vector<int64_t>;

int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

std::vector<int64_t> unravel(int64_t i, const Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t> &idx, const Shape &s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d)
    i = i * s[d] + idx[d];
  return i;
}

/// Linear index into `in` of output element `o` under numpy broadcasting.
int64_t broadcastIndex(const Shape &in, const Shape &out, int64_t o) {
  const size_t lead = out.size() - in.size();
  int64_t idx = 0, stride = 1;
  for (size_t d = out.size(); d-- > 0;) {
    int64_t c = o % out[d];
    o /= out[d];
    if (d < lead)
      continue;
    int64_t n = in[d - lead];
    if (n != 1)
      idx += c * stride;
    stride *= n;
  }
  return idx;
}

/// An owning tensor.
struct Buf {
  std::vector<unsigned char> mem;
  Tensor t;

  Buf(DType dtype, Shape shape) {
    t.dtype = dtype;
    t.shape = std::move(shape);
    mem.assign(std::max<size_t>(t.bytes(), 1), 0);
    t.data = mem.data();
  }
  Buf(Buf &&) = default;
  Buf(const Buf &) = delete;

  template <class T> T *p() { return static_cast<T *>(t.data); }
  template <class T> const T *p() const { return static_cast<const T *>(t.data); }
  int64_t n() const { return t.numel(); }

  double get(int64_t i) const {
    switch (t.dtype) {
    case DType::F32: return p<float>()[i];
    case DType::F64: return p<double>()[i];
    case DType::I64: return double(p<int64_t>()[i]);
    case DType::I32: return p<int32_t>()[i];
    case DType::I8: return p<int8_t>()[i];
    case DType::Bool: return p<uint8_t>()[i];
    default: ADD_FAILURE() << "get on " << dtypeName(t.dtype); return 0;
    }
  }
  void set(int64_t i, double v) {
    switch (t.dtype) {
    case DType::F32: p<float>()[i] = float(v); break;
    case DType::F64: p<double>()[i] = v; break;
    case DType::I64: p<int64_t>()[i] = int64_t(v); break;
    case DType::I32: p<int32_t>()[i] = int32_t(v); break;
    case DType::I8: p<int8_t>()[i] = int8_t(v); break;
    case DType::Bool: p<uint8_t>()[i] = v != 0; break;
    default: ADD_FAILURE() << "set on " << dtypeName(t.dtype);
    }
  }
  std::vector<double> values() const {
    std::vector<double> v(static_cast<size_t>(n()));
    for (int64_t i = 0; i < n(); ++i)
      v[size_t(i)] = get(i);
    return v;
  }
};

Buf randomBuf(DType dtype, Shape shape, uint32_t seed, double lo = -1.0,
              double hi = 1.0) {
  Buf b(dtype, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int> ints{int(lo), int(hi)};
  for (int64_t i = 0; i < b.n(); ++i) {
    if (dtype == DType::F32 || dtype == DType::F64)
      b.set(i, real(rng));
    else
      b.set(i, ints(rng));
  }
  return b;
}

Buf fromValues(DType dtype, Shape shape, const std::vector<double> &v) {
  Buf b(dtype, std::move(shape));
  EXPECT_EQ(int64_t(v.size()), b.n());
  for (int64_t i = 0; i < b.n() && i < int64_t(v.size()); ++i)
    b.set(i, v[size_t(i)]);
  return b;
}

/// got[i] ~ ref[i] within rtol * |ref| + atol; reports the first mismatches.
void expectClose(const Buf &got, const std::vector<double> &ref, double rtol,
                 double atol, const std::string &what = "") {
  ASSERT_EQ(got.n(), int64_t(ref.size())) << what;
  int failures = 0;
  for (int64_t i = 0; i < got.n(); ++i) {
    double g = got.get(i), r = ref[size_t(i)];
    bool ok = (std::isnan(r) && std::isnan(g)) || (std::isinf(r) && g == r) ||
              std::fabs(g - r) <= rtol * std::fabs(r) + atol;
    if (!ok && failures++ < 5)
      ADD_FAILURE() << what << " element " << i << ": got " << g
                    << ", expected " << r;
  }
  EXPECT_EQ(failures, 0) << what;
}

void expectExact(const Buf &got, const std::vector<double> &ref,
                 const std::string &what = "") {
  expectClose(got, ref, 0, 0, what);
}

constexpr double kRtol = 1e-5;

//===----------------------------------------------------------------------===//
// binary / compare / where
//===----------------------------------------------------------------------===//

double refBinary(BinaryKind k, double a, double b) {
  switch (k) {
  case BinaryKind::Add: return a + b;
  case BinaryKind::Sub: return a - b;
  case BinaryKind::Mul: return a * b;
  case BinaryKind::Div: return a / b;
  case BinaryKind::Pow: return std::pow(a, b);
  }
  return 0;
}

const BinaryKind kBinaryKinds[] = {BinaryKind::Add, BinaryKind::Sub,
                                   BinaryKind::Mul, BinaryKind::Div,
                                   BinaryKind::Pow};

struct BroadcastCase {
  Shape a, b, out;
};

const BroadcastCase kBroadcastCases[] = {
    {{4, 5, 6}, {4, 5, 6}, {4, 5, 6}},         // same shape
    {{4, 5, 6}, {}, {4, 5, 6}},                // scalar
    {{1}, {7, 3}, {7, 3}},                     // scalar-like on the left
    {{4, 5, 6}, {6}, {4, 5, 6}},               // row (bias)
    {{4, 5, 6}, {4, 1, 6}, {4, 5, 6}},         // middle dim 1
    {{5, 6}, {3, 5, 6}, {3, 5, 6}},            // rank mismatch
    {{4, 1}, {1, 6}, {4, 6}},                  // both broadcast
    {{2, 1, 3, 1}, {5, 1, 4}, {2, 5, 3, 4}},   // mixed
    {{64, 40, 33}, {64, 1, 33}, {64, 40, 33}}, // large (parallel)
    {{3, 70000}, {70000}, {3, 70000}},         // long rows (pieces)
};

TEST(KernelBinary, FloatBroadcasting) {
  uint32_t seed = 1;
  for (const BroadcastCase &c : kBroadcastCases)
    for (BinaryKind k : kBinaryKinds)
      for (DType dt : {DType::F32, DType::F64}) {
        bool pow = k == BinaryKind::Pow, div = k == BinaryKind::Div;
        Buf a = randomBuf(dt, c.a, seed++, pow ? 0.1 : -2.0, 2.0);
        Buf b = randomBuf(dt, c.b, seed++, div ? 0.5 : -2.0, 2.0);
        Buf out(dt, c.out);
        ASSERT_TRUE(binary(k, a.t, b.t, out.t).ok);
        std::vector<double> ref(static_cast<size_t>(out.n()));
        for (int64_t i = 0; i < out.n(); ++i)
          ref[size_t(i)] = refBinary(k, a.get(broadcastIndex(c.a, c.out, i)),
                                     b.get(broadcastIndex(c.b, c.out, i)));
        expectClose(out, ref, dt == DType::F32 ? kRtol : 1e-12, 1e-12,
                    formatShape(c.a) + " op " + formatShape(c.b) + " kind " +
                        std::to_string(int(k)));
      }
}

TEST(KernelBinary, PowSpecialExponents) {
  Buf a = randomBuf(DType::F32, {100}, 7, -3, 3);
  for (double e : {1.0, 2.0, 3.0, 0.5}) {
    Buf b = fromValues(DType::F32, {}, {e});
    Buf out(DType::F32, {100});
    ASSERT_TRUE(binary(BinaryKind::Pow, a.t, b.t, out.t).ok);
    std::vector<double> ref;
    for (int64_t i = 0; i < 100; ++i)
      ref.push_back(std::pow(double(a.p<float>()[i]), e));
    expectClose(out, ref, kRtol, 1e-6, "pow " + std::to_string(e));
  }
}

TEST(KernelBinary, Integers) {
  // Truncating division, exact powers, wrapping arithmetic.
  int64_t av[] = {7, -7, 7, -7, 3, -2, 0, 5, 2, -3};
  int64_t bv[] = {2, 2, -2, -2, 4, 3, 5, 1, 10, 3};
  for (DType dt : {DType::I64, DType::I32, DType::I8}) {
    Buf a(dt, {10}), b(dt, {10});
    for (int i = 0; i < 10; ++i) {
      a.set(i, double(av[i]));
      b.set(i, double(bv[i]));
    }
    for (BinaryKind k : kBinaryKinds) {
      Buf out(dt, {10});
      ASSERT_TRUE(binary(k, a.t, b.t, out.t).ok);
      std::vector<double> ref;
      for (int i = 0; i < 10; ++i) {
        int64_t x = av[i], y = bv[i], r = 0;
        switch (k) {
        case BinaryKind::Add: r = x + y; break;
        case BinaryKind::Sub: r = x - y; break;
        case BinaryKind::Mul: r = x * y; break;
        case BinaryKind::Div: r = x / y; break; // C++ truncates
        case BinaryKind::Pow: // 1 / x^|y| truncates to 0 unless |x| == 1
          r = y < 0 ? (x == 1 ? 1 : x == -1 ? (y % 2 ? -1 : 1) : 0) : 1;
          for (int64_t e = 0; e < y; ++e)
            r *= x;
          break;
        }
        if (dt == DType::I8)
          r = int8_t(uint8_t(uint64_t(r)));
        ref.push_back(double(r));
      }
      expectExact(out, ref, std::string(dtypeName(dt)) + " kind " +
                                std::to_string(int(k)));
    }
  }
  // Broadcast and wraparound: i8 100 + 100 = -56; 3^5 = 243 -> -13.
  Buf a = fromValues(DType::I8, {2, 1}, {100, 3});
  Buf b = fromValues(DType::I8, {3}, {100, 5, 0});
  Buf out(DType::I8, {2, 3});
  ASSERT_TRUE(binary(BinaryKind::Add, a.t, b.t, out.t).ok);
  expectExact(out, {-56, 105, 100, 103, 8, 3});
  ASSERT_TRUE(binary(BinaryKind::Pow, a.t, b.t, out.t).ok);
  // 100^100 wraps to 0 (2^200 divides it), 3^100 = -47 and 3^5 = 243 = -13
  // modulo 256.
  expectExact(out, {0, 0, 1, -47, -13, 1});
  // Division by zero does not trap.
  Buf z = fromValues(DType::I32, {1}, {0});
  Buf x = fromValues(DType::I32, {2}, {5, -2147483648.0});
  Buf m1 = fromValues(DType::I32, {1}, {-1});
  Buf o2(DType::I32, {2});
  EXPECT_TRUE(binary(BinaryKind::Div, x.t, z.t, o2.t).ok);
  EXPECT_TRUE(binary(BinaryKind::Div, x.t, m1.t, o2.t).ok);
  EXPECT_EQ(o2.p<int32_t>()[0], -5);
  // Large integer broadcast (parallel path).
  Buf la = randomBuf(DType::I64, {300, 200}, 3, -1000, 1000);
  Buf lb = randomBuf(DType::I64, {200}, 4, -1000, 1000);
  Buf lo(DType::I64, {300, 200});
  ASSERT_TRUE(binary(BinaryKind::Mul, la.t, lb.t, lo.t).ok);
  std::vector<double> ref;
  for (int64_t i = 0; i < lo.n(); ++i)
    ref.push_back(la.get(i) * lb.get(i % 200));
  expectExact(lo, ref, "large i64");
}

TEST(KernelCompare, AllKindsAndTypes) {
  const CompareKind kinds[] = {CompareKind::Eq, CompareKind::Ne, CompareKind::Lt,
                               CompareKind::Le, CompareKind::Gt, CompareKind::Ge};
  uint32_t seed = 100;
  for (DType dt : {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8,
                   DType::Bool})
    for (CompareKind k : kinds) {
      // Small integer-valued data so that equality happens.
      bool isBool = dt == DType::Bool;
      Buf a = randomBuf(dt == DType::F32 || dt == DType::F64 ? DType::I64 : dt,
                        {3, 1, 5}, seed++, isBool ? 0 : -2, isBool ? 1 : 2);
      Buf b = randomBuf(dt == DType::F32 || dt == DType::F64 ? DType::I64 : dt,
                        {4, 1}, seed++, isBool ? 0 : -2, isBool ? 1 : 2);
      Buf fa(dt, a.t.shape), fb(dt, b.t.shape);
      for (int64_t i = 0; i < a.n(); ++i)
        fa.set(i, a.get(i));
      for (int64_t i = 0; i < b.n(); ++i)
        fb.set(i, b.get(i));
      Buf out(DType::Bool, {3, 4, 5});
      ASSERT_TRUE(compare(k, fa.t, fb.t, out.t).ok);
      std::vector<double> ref;
      for (int64_t i = 0; i < out.n(); ++i) {
        double x = fa.get(broadcastIndex(fa.t.shape, out.t.shape, i));
        double y = fb.get(broadcastIndex(fb.t.shape, out.t.shape, i));
        bool r = false;
        switch (k) {
        case CompareKind::Eq: r = x == y; break;
        case CompareKind::Ne: r = x != y; break;
        case CompareKind::Lt: r = x < y; break;
        case CompareKind::Le: r = x <= y; break;
        case CompareKind::Gt: r = x > y; break;
        case CompareKind::Ge: r = x >= y; break;
        }
        ref.push_back(r);
      }
      expectExact(out, ref, std::string("compare ") + dtypeName(dt));
    }
  // f16: 1.0, 2.0, -0.5 against 1.0.
  Buf h(DType::F16, {3}), one(DType::F16, {});
  uint16_t hv[] = {0x3c00, 0x4000, 0xb800};
  std::memcpy(h.t.data, hv, sizeof hv);
  *one.p<uint16_t>() = 0x3c00;
  Buf out(DType::Bool, {3});
  ASSERT_TRUE(compare(CompareKind::Ge, h.t, one.t, out.t).ok);
  expectExact(out, {1, 1, 0});
}

TEST(KernelWhere, ThreeWayBroadcast) {
  Buf cond = randomBuf(DType::Bool, {4, 1, 6}, 5, 0, 1);
  for (DType dt : {DType::F32, DType::I64, DType::Bool, DType::F64}) {
    Buf a = randomBuf(dt, {3, 1}, 6, dt == DType::Bool ? 0 : -5, dt == DType::Bool ? 1 : 5);
    Buf b = randomBuf(dt, {6}, 7, dt == DType::Bool ? 0 : -5, dt == DType::Bool ? 1 : 5);
    Buf out(dt, {4, 3, 6});
    ASSERT_TRUE(where(cond.t, a.t, b.t, out.t).ok);
    std::vector<double> ref;
    for (int64_t i = 0; i < out.n(); ++i)
      ref.push_back(cond.get(broadcastIndex(cond.t.shape, out.t.shape, i))
                        ? a.get(broadcastIndex(a.t.shape, out.t.shape, i))
                        : b.get(broadcastIndex(b.t.shape, out.t.shape, i)));
    expectExact(out, ref, dtypeName(dt));
  }
  // Two-byte elements move as bytes (masked fill of f16 with a scalar).
  Buf c2 = fromValues(DType::Bool, {2, 2}, {1, 0, 0, 1});
  Buf h(DType::F16, {2, 2}), fill(DType::F16, {});
  uint16_t hv[] = {1, 2, 3, 4};
  std::memcpy(h.t.data, hv, sizeof hv);
  *fill.p<uint16_t>() = 0xfc00; // -inf
  Buf out(DType::F16, {2, 2});
  ASSERT_TRUE(where(c2.t, fill.t, h.t, out.t).ok);
  EXPECT_EQ(out.p<uint16_t>()[0], 0xfc00);
  EXPECT_EQ(out.p<uint16_t>()[1], 2);
  EXPECT_EQ(out.p<uint16_t>()[2], 3);
  EXPECT_EQ(out.p<uint16_t>()[3], 0xfc00);
  // Large (parallel) same-shape.
  Buf lc = randomBuf(DType::Bool, {50000}, 8, 0, 1);
  Buf la = randomBuf(DType::F32, {50000}, 9), lb = randomBuf(DType::F32, {50000}, 10);
  Buf lo(DType::F32, {50000});
  ASSERT_TRUE(where(lc.t, la.t, lb.t, lo.t).ok);
  std::vector<double> ref;
  for (int64_t i = 0; i < 50000; ++i)
    ref.push_back(lc.get(i) ? la.get(i) : lb.get(i));
  expectExact(lo, ref, "large");
}

//===----------------------------------------------------------------------===//
// unary
//===----------------------------------------------------------------------===//

double refUnary(UnaryKind k, double x) {
  switch (k) {
  case UnaryKind::Neg: return -x;
  case UnaryKind::Exp: return std::exp(x);
  case UnaryKind::Log: return std::log(x);
  case UnaryKind::Sqrt: return std::sqrt(x);
  case UnaryKind::Rsqrt: return 1 / std::sqrt(x);
  case UnaryKind::Reciprocal: return 1 / x;
  case UnaryKind::Tanh: return std::tanh(x);
  case UnaryKind::Erf: return std::erf(x);
  case UnaryKind::Sigmoid: return 1 / (1 + std::exp(-x));
  case UnaryKind::Relu: return x > 0 ? x : 0;
  case UnaryKind::Silu: return x / (1 + std::exp(-x));
  // 0.5 x (1 + erf(x / sqrt2)) and 0.5 x (1 + tanh(u)), written without the
  // cancellation of 1 + erf / 1 + tanh for negative x.
  case UnaryKind::Gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
  case UnaryKind::GeluTanh:
    return x / (1 + std::exp(-2 * std::sqrt(2 / M_PI) *
                             (x + 0.044715 * x * x * x)));
  case UnaryKind::Cos: return std::cos(x);
  case UnaryKind::Sin: return std::sin(x);
  }
  return 0;
}

const UnaryKind kUnaryKinds[] = {
    UnaryKind::Neg,     UnaryKind::Exp,  UnaryKind::Log,      UnaryKind::Sqrt,
    UnaryKind::Rsqrt,   UnaryKind::Reciprocal, UnaryKind::Tanh, UnaryKind::Erf,
    UnaryKind::Sigmoid, UnaryKind::Relu, UnaryKind::Silu,     UnaryKind::Gelu,
    UnaryKind::GeluTanh, UnaryKind::Cos, UnaryKind::Sin};

TEST(KernelUnary, EveryKindFloat) {
  uint32_t seed = 200;
  for (UnaryKind k : kUnaryKinds)
    for (DType dt : {DType::F32, DType::F64})
      for (int64_t n : {int64_t(37), int64_t(40000)}) {
        bool positive = k == UnaryKind::Log || k == UnaryKind::Sqrt ||
                        k == UnaryKind::Rsqrt;
        Buf x = randomBuf(dt, {n}, seed++, positive ? 0.01 : -6, 6);
        Buf out(dt, {n});
        ASSERT_TRUE(unary(k, x.t, out.t).ok);
        std::vector<double> ref;
        for (int64_t i = 0; i < n; ++i)
          ref.push_back(refUnary(k, x.get(i)));
        // erf-based gelu and erf in f32: glibc's erff is accurate to ~1 ulp
        // of its result; small absolute term for values near zero.
        expectClose(out, ref, dt == DType::F32 ? kRtol : 1e-12,
                    dt == DType::F32 ? 1e-7 : 1e-14,
                    std::string("unary ") + std::to_string(int(k)) + " " +
                        dtypeName(dt));
      }
}

TEST(KernelUnary, FloatAccuracyOverWideRanges) {
  // The vectorized exp/tanh/sigmoid cover the whole float range.
  std::vector<double> xs;
  for (double x = -120; x <= 100; x += 0.0137)
    xs.push_back(x);
  for (double x : {0.0, -0.0, 1e-7, -1e-7, 1e-30, 88.7, 88.72, -87.3, -103.9})
    xs.push_back(x);
  Buf x = fromValues(DType::F32, {int64_t(xs.size())}, xs);
  for (UnaryKind k : {UnaryKind::Exp, UnaryKind::Tanh, UnaryKind::Sigmoid,
                      UnaryKind::Silu, UnaryKind::GeluTanh, UnaryKind::Gelu,
                      UnaryKind::Erf}) {
    Buf out(DType::F32, x.t.shape);
    ASSERT_TRUE(unary(k, x.t, out.t).ok);
    std::vector<double> ref;
    for (int64_t i = 0; i < x.n(); ++i) {
      double r = refUnary(k, double(x.p<float>()[i]));
      // Results beyond the float range are inf; below it, 0 or subnormal.
      if (std::fabs(r) > std::numeric_limits<float>::max())
        r = r > 0 ? INFINITY : -INFINITY;
      ref.push_back(r);
    }
    // A few ulp, except: gelu loses ~3 bits to 1 - erf(t) just below |t| = 1;
    // gelu_tanh forms 2u ~ x^3 in float, whose rounding is amplified by |2u|
    // (up to ~88) in the far negative tail (results < 1e-20).
    double rtol = k == UnaryKind::GeluTanh ? 3e-5 : k == UnaryKind::Gelu ? 2e-6 : 4e-7;
    expectClose(out, ref, rtol, 2e-38, "wide " + std::to_string(int(k)));
  }
  // Special values.
  Buf s = fromValues(DType::F32, {3}, {INFINITY, -INFINITY, NAN});
  Buf out(DType::F32, {3});
  ASSERT_TRUE(unary(UnaryKind::Exp, s.t, out.t).ok);
  EXPECT_EQ(out.p<float>()[0], INFINITY);
  EXPECT_EQ(out.p<float>()[1], 0.0f);
  EXPECT_TRUE(std::isnan(out.p<float>()[2]));
  ASSERT_TRUE(unary(UnaryKind::Tanh, s.t, out.t).ok);
  EXPECT_EQ(out.p<float>()[0], 1.0f);
  EXPECT_EQ(out.p<float>()[1], -1.0f);
  EXPECT_TRUE(std::isnan(out.p<float>()[2]));
  ASSERT_TRUE(unary(UnaryKind::Sigmoid, s.t, out.t).ok);
  EXPECT_EQ(out.p<float>()[0], 1.0f);
  EXPECT_EQ(out.p<float>()[1], 0.0f);
}

TEST(KernelUnary, IntegersAndErrors) {
  for (DType dt : {DType::I64, DType::I32, DType::I8}) {
    Buf x = fromValues(dt, {5}, {-3, 0, 4, -128, 127});
    Buf out(dt, {5});
    ASSERT_TRUE(unary(UnaryKind::Neg, x.t, out.t).ok);
    double wrapped = dt == DType::I8 ? -128 : 128; // -(-128) wraps in i8
    expectExact(out, {3, 0, -4, wrapped, -127}, dtypeName(dt));
    ASSERT_TRUE(unary(UnaryKind::Relu, x.t, out.t).ok);
    expectExact(out, {0, 0, 4, 0, 127}, dtypeName(dt));
    Status st = unary(UnaryKind::Exp, x.t, out.t);
    EXPECT_FALSE(st.ok);
    EXPECT_NE(st.message.find("unsupported element type"), std::string::npos)
        << st.message;
  }
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

/// Reference f16 / bf16 decoding (from the format definition).
double decodeHalf(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}
double decodeBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Nearest encodable value by search over all finite codes (ties to even).
uint16_t nearestCode(double v, double (*decode)(uint16_t), uint16_t maxCode,
                     uint16_t infCode) {
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  // Codes 0..maxCode are the positive finite values in increasing order.
  uint16_t lo = 0, hi = maxCode;
  if (a >= decode(maxCode)) {
    double ulp = decode(maxCode) - decode(uint16_t(maxCode - 1));
    return uint16_t(sign | (a >= decode(maxCode) + ulp / 2 ? infCode : maxCode));
  }
  while (hi - lo > 1) {
    uint16_t mid = uint16_t((lo + hi) / 2);
    (decode(mid) <= a ? lo : hi) = mid;
  }
  double dl = a - decode(lo), dh = decode(hi) - a;
  uint16_t c = dl < dh ? lo : dh < dl ? hi : ((lo & 1) ? hi : lo);
  return uint16_t(sign | c);
}

const DType kAllTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                           DType::I64, DType::I32, DType::I8,  DType::Bool};

/// Writes small exact values into any type.
void setAny(Buf &b, int64_t i, double v) {
  if (b.t.dtype == DType::F16)
    b.p<uint16_t>()[i] = nearestCode(v, decodeHalf, 0x7bff, 0x7c00);
  else if (b.t.dtype == DType::BF16)
    b.p<uint16_t>()[i] = nearestCode(v, decodeBf16, 0x7f7f, 0x7f80);
  else
    b.set(i, v);
}
double getAny(const Buf &b, int64_t i) {
  if (b.t.dtype == DType::F16)
    return decodeHalf(b.p<uint16_t>()[i]);
  if (b.t.dtype == DType::BF16)
    return decodeBf16(b.p<uint16_t>()[i]);
  return b.get(i);
}

TEST(KernelCast, EveryPairOnExactValues) {
  const std::vector<double> vals = {0, 1, 2, -3, 5, -0.0, 1, 100, -128, 64};
  for (DType from : kAllTypes)
    for (DType to : kAllTypes) {
      Buf x(from, {int64_t(vals.size())});
      for (size_t i = 0; i < vals.size(); ++i)
        setAny(x, int64_t(i), from == DType::Bool ? (vals[i] != 0) : vals[i]);
      Buf out(to, x.t.shape);
      ASSERT_TRUE(cast(x.t, out.t).ok) << dtypeName(from) << "->" << dtypeName(to);
      for (size_t i = 0; i < vals.size(); ++i) {
        double v = from == DType::Bool ? (vals[i] != 0) : vals[i];
        double expect = to == DType::Bool ? (v != 0) : v;
        EXPECT_EQ(getAny(out, int64_t(i)), expect)
            << dtypeName(from) << "->" << dtypeName(to) << " value " << v;
      }
    }
}

TEST(KernelCast, FloatToIntTruncatesAndBool) {
  Buf x = fromValues(DType::F32, {8}, {2.7, -2.7, 0.5, -0.5, 0, 126.9, -1e-30, NAN});
  Buf i32(DType::I32, {8}), i8(DType::I8, {8}), bl(DType::Bool, {8});
  ASSERT_TRUE(cast(x.t, i32.t).ok);
  ASSERT_TRUE(cast(x.t, i8.t).ok);
  ASSERT_TRUE(cast(x.t, bl.t).ok);
  EXPECT_EQ(i32.p<int32_t>()[0], 2);
  EXPECT_EQ(i32.p<int32_t>()[1], -2);
  EXPECT_EQ(i32.p<int32_t>()[2], 0);
  EXPECT_EQ(i32.p<int32_t>()[3], 0);
  EXPECT_EQ(i8.p<int8_t>()[5], 126);
  expectExact(bl, {1, 1, 1, 1, 0, 1, 1, 1});
  // Large i64 to f32 rounds to nearest even once.
  Buf big = fromValues(DType::I64, {1}, {0});
  big.p<int64_t>()[0] = (int64_t(1) << 40) + 1;
  Buf f(DType::F32, {1});
  ASSERT_TRUE(cast(big.t, f.t).ok);
  EXPECT_EQ(f.p<float>()[0], float(int64_t(1) << 40));
}

TEST(KernelCast, HalfAndBfloatRoundTripEveryCode) {
  for (DType dt : {DType::F16, DType::BF16}) {
    Buf codes(dt, {65536});
    for (int i = 0; i < 65536; ++i)
      codes.p<uint16_t>()[i] = uint16_t(i);
    Buf f(DType::F32, {65536}), d(DType::F64, {65536});
    ASSERT_TRUE(cast(codes.t, f.t).ok);
    ASSERT_TRUE(cast(codes.t, d.t).ok);
    Buf back(dt, {65536}), back64(dt, {65536});
    ASSERT_TRUE(cast(f.t, back.t).ok);
    ASSERT_TRUE(cast(d.t, back64.t).ok);
    auto decode = dt == DType::F16 ? decodeHalf : decodeBf16;
    int failures = 0;
    for (int i = 0; i < 65536; ++i) {
      double ref = decode(uint16_t(i));
      double got = f.p<float>()[i];
      if (std::isnan(ref)) {
        failures += !std::isnan(got) || !std::isnan(decode(back.p<uint16_t>()[i])) ||
                    !std::isnan(d.p<double>()[i]) ||
                    !std::isnan(decode(back64.p<uint16_t>()[i]));
        continue;
      }
      failures += got != ref || d.p<double>()[i] != ref ||
                  std::signbit(got) != std::signbit(ref) ||
                  back.p<uint16_t>()[i] != i || back64.p<uint16_t>()[i] != i;
    }
    EXPECT_EQ(failures, 0) << dtypeName(dt);
  }
}

TEST(KernelCast, HalfAndBfloatRoundToNearestEven) {
  std::mt19937 rng(42);
  std::vector<double> vals;
  // Random magnitudes over every binade (subnormal to overflow), and ties.
  for (int i = 0; i < 20000; ++i) {
    double m = std::uniform_real_distribution<double>(1, 2)(rng);
    int e = std::uniform_int_distribution<int>(-30, 17)(rng);
    vals.push_back((i & 1 ? -1 : 1) * std::ldexp(m, e));
  }
  for (int code = 0; code < 0x7bff; code += 7) // half midpoints (ties)
    vals.push_back((decodeHalf(uint16_t(code)) + decodeHalf(uint16_t(code + 1))) / 2);
  vals.push_back(65504);
  vals.push_back(65519.99);
  vals.push_back(65520);
  vals.push_back(std::ldexp(1.0, -25));       // tie to 0
  vals.push_back(std::ldexp(3.0, -25));       // tie to 2^-23
  vals.push_back(1e-10);
  for (DType src : {DType::F32, DType::F64}) {
    Buf x(src, {int64_t(vals.size())});
    for (size_t i = 0; i < vals.size(); ++i)
      x.set(int64_t(i), vals[i]);
    Buf h(DType::F16, x.t.shape);
    ASSERT_TRUE(cast(x.t, h.t).ok);
    int failures = 0;
    for (size_t i = 0; i < vals.size(); ++i) {
      uint16_t want = nearestCode(x.get(int64_t(i)), decodeHalf, 0x7bff, 0x7c00);
      if (h.p<uint16_t>()[i] != want && failures++ < 5)
        ADD_FAILURE() << dtypeName(src) << " " << x.get(int64_t(i)) << " -> f16 "
                      << h.p<uint16_t>()[i] << ", want " << want;
    }
    EXPECT_EQ(failures, 0);
  }
  // bf16: random floats over the whole exponent range plus ties.
  std::vector<double> bv;
  for (int i = 0; i < 20000; ++i) {
    double m = std::uniform_real_distribution<double>(1, 2)(rng);
    int e = std::uniform_int_distribution<int>(-133, 127)(rng);
    bv.push_back((i & 1 ? -1 : 1) * std::ldexp(m, e));
  }
  for (int code = 0; code < 0x7f7f; code += 97)
    bv.push_back((decodeBf16(uint16_t(code)) + decodeBf16(uint16_t(code + 1))) / 2);
  for (DType src : {DType::F32, DType::F64}) {
    Buf x(src, {int64_t(bv.size())});
    for (size_t i = 0; i < bv.size(); ++i)
      x.set(int64_t(i), bv[i]);
    Buf h(DType::BF16, x.t.shape);
    ASSERT_TRUE(cast(x.t, h.t).ok);
    int failures = 0;
    for (size_t i = 0; i < bv.size(); ++i) {
      uint16_t want = nearestCode(x.get(int64_t(i)), decodeBf16, 0x7f7f, 0x7f80);
      if (h.p<uint16_t>()[i] != want && failures++ < 5)
        ADD_FAILURE() << dtypeName(src) << " " << x.get(int64_t(i))
                      << " -> bf16 " << h.p<uint16_t>()[i] << ", want " << want;
    }
    EXPECT_EQ(failures, 0);
  }
}

//===----------------------------------------------------------------------===//
// matmul / linear
//===----------------------------------------------------------------------===//

/// numpy.matmul reference.
std::vector<double> refMatmul(const Buf &a, const Buf &b, const Shape &outShape) {
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
    int64_t ai = broadcastIndex(aB, batch, t), bi = broadcastIndex(bB, batch, t);
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
      {{2, 1, 4, 6}, {3, 6, 5}, {2, 3, 4, 5}},   // batch broadcast
      {{6}, {2, 6, 5}, {2, 5}},                  // rank-1 a
      {{3, 4, 6}, {6}, {3, 4}},                  // rank-1 b
      {{6}, {6}, {}},                            // dot
      {{2, 3, 4, 6}, {6, 5}, {2, 3, 4, 5}},      // folded into one GEMM
      {{1, 4, 6}, {3, 6, 5}, {3, 4, 5}},         // a broadcast over batch
      {{16, 32, 64}, {16, 64, 48}, {16, 32, 48}}, // parallel over batches
      {{3, 0, 4}, {4, 2}, {3, 0, 2}},            // empty
      {{2, 3, 0}, {0, 4}, {2, 3, 4}},            // K = 0
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

TEST(KernelLinear, BiasTransposeAndRank3) {
  uint32_t seed = 400;
  for (Shape xs : {Shape{5, 8}, Shape{2, 5, 8}, Shape{4, 33, 64}, Shape{8}})
    for (bool transposed : {false, true})
      for (bool withBias : {false, true}) {
        int64_t k = xs.back(), n = k == 64 ? 96 : 6;
        Buf x = randomBuf(DType::F32, xs, seed++);
        Buf w = randomBuf(DType::F32, transposed ? Shape{n, k} : Shape{k, n}, seed++);
        Buf bias = randomBuf(DType::F32, {n}, seed++);
        Shape os = xs;
        os.back() = n;
        Buf out(DType::F32, os);
        ASSERT_TRUE(linear(x.t, w.t, withBias ? &bias.t : nullptr, transposed, out.t).ok);
        expectClose(out, refLinear(x, w, withBias ? &bias : nullptr, transposed),
                    kRtol, 1e-5,
                    formatShape(xs) + (transposed ? " T" : "") + (withBias ? " bias" : ""));
      }
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
      Buf g = randomBuf(DType::F32, ns, seed++), b = randomBuf(DType::F32, ns, seed++);
      Buf out(DType::F32, c.x);
      const float eps = 1e-5f;
      ASSERT_TRUE(layerNorm(x.t, g.t, withBias ? &b.t : nullptr, c.axis, eps, out.t).ok);
      int64_t inner = numelOf(ns), outer = x.n() / inner;
      std::vector<double> ref(static_cast<size_t>(x.n()));
      for (int64_t r = 0; r < outer; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; ++i)
          mean += x.get(r * inner + i);
        mean /= double(inner);
        for (int64_t i = 0; i < inner; ++i)
          var += std::pow(x.get(r * inner + i) - mean, 2);
        var /= double(inner);
        for (int64_t i = 0; i < inner; ++i)
          ref[size_t(r * inner + i)] =
              (x.get(r * inner + i) - mean) / std::sqrt(var + double(eps)) * g.get(i) +
              (withBias ? b.get(i) : 0);
      }
      expectClose(out, ref, kRtol, 1e-6, formatShape(c.x));
    }
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
                 Case{{3, 7, 300}, 1}, Case{{2, 50, 400}, 2}, Case{{64, 600}, 1},
                 Case{{2, 40, 600}, 1}})
    for (DType dt : {DType::F32, DType::F64}) {
      Buf x = randomBuf(dt, c.s, seed++, -8, 8);
      Buf out(dt, c.s);
      ASSERT_TRUE(softmax(x.t, c.axis, out.t).ok);
      expectClose(out, refSoftmax(x, c.axis), dt == DType::F32 ? kRtol : 1e-12,
                  1e-9, formatShape(c.s) + " axis " + std::to_string(c.axis));
    }
  // A fully masked row gives zeros (not NaN); -inf entries give 0.
  Buf x = fromValues(DType::F32, {2, 3}, {-INFINITY, -INFINITY, -INFINITY, 0, -INFINITY, 0});
  Buf out(DType::F32, {2, 3});
  ASSERT_TRUE(softmax(x.t, 1, out.t).ok);
  expectExact(out, {0, 0, 0, 0.5, 0, 0.5});
  // The same along a middle axis (the strided path), and a NaN makes its
  // whole row NaN on both paths (the CUDA kernels do the same).
  for (DType dt : {DType::F32, DType::F64}) {
    Buf t = fromValues(dt, {3, 2}, {-INFINITY, 0, -INFINITY, NAN, -INFINITY, 0});
    Buf tOut(dt, {3, 2});
    ASSERT_TRUE(softmax(t.t, 0, tOut.t).ok);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(tOut.get(2 * i), 0.0) << dtypeName(dt) << " row " << i;
      EXPECT_TRUE(std::isnan(tOut.get(2 * i + 1))) << dtypeName(dt) << " row " << i;
    }
    Buf r = fromValues(dt, {1, 3}, {1, NAN, 2});
    Buf rOut(dt, {1, 3});
    ASSERT_TRUE(softmax(r.t, 1, rOut.t).ok);
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_TRUE(std::isnan(rOut.get(i))) << dtypeName(dt) << " element " << i;
  }
}

TEST(KernelReduce, EveryKindSeveralAxes) {
  const ReduceKind kinds[] = {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Max,
                              ReduceKind::Min};
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
                          std::to_string(axes.size()) + "@" + std::to_string(axes[0]));
        }
}

//===----------------------------------------------------------------------===//
// attention
//===----------------------------------------------------------------------===//

std::vector<double> refAttention(const Buf &q, const Buf &k, const Buf &v,
                                 const Buf *mask, double scale, bool causal) {
  int64_t B = q.t.shape[0], H = q.t.shape[1], Sq = q.t.shape[2], D = q.t.shape[3];
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
            acc += s[size_t(j)] / sum * v.get(((b * Hkv + hk) * Sk + j) * Dv + d);
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
    {2, 4, 2, 5, 23, 16, 16, true, {}},             // GQA, Sq < Sk (kv cache)
    {1, 6, 1, 100, 130, 32, 24, true, {100, 130}},  // MQA, blocks, Dv != D
    {2, 4, 2, 9, 9, 8, 8, false, {2, 1, 1, 9}},     // padding-style mask
    {1, 2, 2, 20, 12, 8, 8, true, {}},              // Sq > Sk: masked rows
    {2, 2, 1, 1, 40, 16, 16, false, {1}},           // decode step, scalar mask
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
                          c.causal, out.t).ok);
    expectClose(out, refAttention(q, k, v, hasMask ? &mask : nullptr, scale, c.causal),
                kRtol, 2e-6,
                "attention B" + std::to_string(c.B) + " H" + std::to_string(c.H) +
                    " Hkv" + std::to_string(c.Hkv) + " Sq" + std::to_string(c.Sq) +
                    " Sk" + std::to_string(c.Sk));
  }
}

TEST(KernelAttention, FullyMaskedRowIsZero) {
  Buf q = randomBuf(DType::F32, {1, 1, 2, 4}, 1), k = randomBuf(DType::F32, {1, 1, 3, 4}, 2);
  Buf v = randomBuf(DType::F32, {1, 1, 3, 4}, 3);
  Buf mask = fromValues(DType::F32, {2, 3}, {-INFINITY, -INFINITY, -INFINITY, 0, 0, 0});
  Buf out(DType::F32, {1, 1, 2, 4});
  ASSERT_TRUE(attention(q.t, k.t, v.t, &mask.t, 0.5f, false, out.t).ok);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(out.p<float>()[i], 0.0f);
  for (int i = 4; i < 8; ++i)
    EXPECT_FALSE(std::isnan(out.p<float>()[i]));
}

//===----------------------------------------------------------------------===//
// gather, crossEntropy, einsum, trilu
//===----------------------------------------------------------------------===//

TEST(KernelGather, AxesNegativeIndicesAndTypes) {
  uint32_t seed = 900;
  // Embedding: axis 0, i64 with negatives.
  Buf table = randomBuf(DType::F32, {10, 6}, seed++);
  Buf ids = fromValues(DType::I64, {2, 3}, {0, 9, -1, 3, -10, 4});
  Buf out(DType::F32, {2, 3, 6});
  ASSERT_TRUE(gather(table.t, ids.t, 0, out.t).ok);
  std::vector<double> ref;
  for (int64_t t = 0; t < 6; ++t) {
    int64_t r = int64_t(ids.get(t));
    r = r < 0 ? r + 10 : r;
    for (int64_t j = 0; j < 6; ++j)
      ref.push_back(table.get(r * 6 + j));
  }
  expectExact(out, ref, "axis 0");
  // axis 1, i32 indices of rank 2, on i64 and f16 data.
  for (DType dt : {DType::I64, DType::F16, DType::Bool}) {
    Buf x(dt, {3, 5, 4});
    for (int64_t i = 0; i < x.n(); ++i) {
      if (dt == DType::F16)
        x.p<uint16_t>()[i] = uint16_t(i * 7);
      else
        x.set(i, dt == DType::Bool ? double(i % 3 == 0) : double(i));
    }
    Buf idx = fromValues(DType::I32, {2, 2}, {4, -5, 2, -1});
    Buf o(dt, {3, 2, 2, 4});
    ASSERT_TRUE(gather(x.t, idx.t, 1, o.t).ok);
    for (int64_t a = 0; a < 3; ++a)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 4; ++c) {
          int64_t r = int64_t(idx.get(t));
          r = r < 0 ? r + 5 : r;
          int64_t src = (a * 5 + r) * 4 + c, dst = (a * 4 + t) * 4 + c;
          if (dt == DType::F16)
            EXPECT_EQ(o.p<uint16_t>()[dst], x.p<uint16_t>()[src]);
          else
            EXPECT_EQ(o.get(dst), x.get(src));
        }
  }
  // Out of range is an error, not a crash.
  Buf bad = fromValues(DType::I64, {1}, {10});
  Buf o1(DType::F32, {1, 6});
  EXPECT_FALSE(gather(table.t, bad.t, 0, o1.t).ok);
  // Large embedding lookup (parallel).
  Buf big = randomBuf(DType::F32, {1000, 64}, seed++);
  Buf bi = randomBuf(DType::I64, {4, 128}, seed++, -1000, 999);
  Buf bo(DType::F32, {4, 128, 64});
  ASSERT_TRUE(gather(big.t, bi.t, 0, bo.t).ok);
  std::vector<double> bref;
  for (int64_t t = 0; t < 512; ++t) {
    int64_t r = int64_t(bi.get(t));
    r = r < 0 ? r + 1000 : r;
    for (int64_t j = 0; j < 64; ++j)
      bref.push_back(big.get(r * 64 + j));
  }
  expectExact(bo, bref, "large");
}

TEST(KernelCrossEntropy, MeanNegativeLogSoftmax) {
  uint32_t seed = 1000;
  for (DType tt : {DType::I64, DType::I32})
    for (Shape s : {Shape{2, 3, 11}, Shape{64, 1000}}) {
      Buf logits = randomBuf(DType::F32, s, seed++, -5, 5);
      Shape ts(s.begin(), s.end() - 1);
      int64_t V = s.back();
      Buf targets = randomBuf(tt, ts, seed++, 0, double(V - 1));
      Buf out(DType::F32, {});
      ASSERT_TRUE(crossEntropy(logits.t, targets.t, out.t).ok);
      double total = 0;
      for (int64_t p = 0; p < targets.n(); ++p) {
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < V; ++j)
          m = std::max(m, logits.get(p * V + j));
        for (int64_t j = 0; j < V; ++j)
          sum += std::exp(logits.get(p * V + j) - m);
        total += m + std::log(sum) - logits.get(p * V + int64_t(targets.get(p)));
      }
      expectClose(out, {total / double(targets.n())}, kRtol, 1e-6, formatShape(s));
    }
}

/// Reference einsum by brute force over all label values.
std::vector<double> refEinsum(const std::vector<std::string> &terms,
                              const std::string &outTerm,
                              const std::vector<const Buf *> &ins) {
  std::string labels;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d)
      if (labels.find(terms[i][d]) == std::string::npos) {
        labels += terms[i][d];
        sizes.push_back(ins[i]->t.shape[d]);
      }
  Shape os;
  for (char c : outTerm)
    os.push_back(sizes[labels.find(c)]);
  std::vector<double> out(static_cast<size_t>(numelOf(os)), 0);
  for (int64_t it = 0; it < numelOf(sizes); ++it) {
    std::vector<int64_t> val = unravel(it, sizes);
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      std::vector<int64_t> idx;
      for (char c : terms[i])
        idx.push_back(val[labels.find(c)]);
      prod *= ins[i]->get(ravel(idx, ins[i]->t.shape));
    }
    std::vector<int64_t> oi;
    for (char c : outTerm)
      oi.push_back(val[labels.find(c)]);
    out[size_t(ravel(oi, os))] += prod;
  }
  return out;
}

TEST(KernelEinsum, Equations) {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
    std::vector<std::string> terms; // for the reference (no ellipsis)
    std::string out;
  };
  const Case cases[] = {
      {"i,j->ij", {{5}, {4}}, {"i", "j"}, "ij"},
      {"bij,bjk->bik", {{3, 4, 5}, {3, 5, 6}}, {"bij", "bjk"}, "bik"},
      {"ii->i", {{5, 5}}, {"ii"}, "i"},
      {"ij->ji", {{3, 7}}, {"ij"}, "ji"},
      {"ij->", {{3, 7}}, {"ij"}, ""},
      {"ij,jk", {{3, 4}, {4, 5}}, {"ij", "jk"}, "ik"},
      {"bhqd,bhkd->bhqk", {{2, 3, 5, 4}, {2, 3, 6, 4}}, {"bhqd", "bhkd"}, "bhqk"},
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}, {"ij", "jk", "kl"}, "il"},
      {"bik,bkj->bji", {{2, 3, 4}, {2, 4, 5}}, {"bik", "bkj"}, "bji"},
      {"ij,ij->i", {{4, 6}, {4, 6}}, {"ij", "ij"}, "i"},
      {"ki,kj->ij", {{6, 3}, {6, 4}}, {"ki", "kj"}, "ij"},  // transposed A
      {"bkd,bqk->bqd", {{2, 5, 3}, {2, 4, 5}}, {"bkd", "bqk"}, "bqd"},
      {"iij,jk->ik", {{3, 3, 4}, {4, 2}}, {"iij", "jk"}, "ik"},
      {"ab,cd->", {{2, 3}, {4, 5}}, {"ab", "cd"}, ""},
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}, {"zij", "zjk"}, "zik"},
  };
  uint32_t seed = 1100;
  for (const Case &c : cases)
    for (DType dt : {DType::F32, DType::F64}) {
      std::vector<Buf> bufs;
      std::vector<const Tensor *> ins;
      std::vector<const Buf *> refIns;
      for (const Shape &s : c.shapes)
        bufs.push_back(randomBuf(dt, s, seed++));
      for (const Buf &b : bufs) {
        ins.push_back(&b.t);
        refIns.push_back(&b);
      }
      std::vector<double> ref = refEinsum(c.terms, c.out, refIns);
      Shape os;
      for (char ch : c.out)
        for (size_t i = 0; i < c.terms.size(); ++i) {
          size_t p = c.terms[i].find(ch);
          if (p != std::string::npos) {
            os.push_back(c.shapes[i][p]);
            break;
          }
        }
      Buf out(dt, os);
      Status st = einsum(c.eq, ins, out.t);
      ASSERT_TRUE(st.ok) << c.eq << ": " << st.message;
      expectClose(out, ref, dt == DType::F32 ? kRtol : 1e-12, 1e-6, c.eq);
    }
  // Ellipsis broadcasting: batch 1 against 3.
  Buf a = randomBuf(DType::F32, {1, 2, 4}, 1), b = randomBuf(DType::F32, {3, 4, 5}, 2);
  Buf out(DType::F32, {3, 2, 5});
  ASSERT_TRUE(einsum("...ij,...jk->...ik", {&a.t, &b.t}, out.t).ok);
  std::vector<double> ref;
  for (int64_t z = 0; z < 3; ++z)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t k = 0; k < 5; ++k) {
        double s = 0;
        for (int64_t j = 0; j < 4; ++j)
          s += a.get(i * 4 + j) * b.get((z * 4 + j) * 5 + k);
        ref.push_back(s);
      }
  expectClose(out, ref, kRtol, 1e-6, "ellipsis broadcast");
  // A malformed equation is an error.
  EXPECT_FALSE(einsum("ij,jk->ik", {&a.t}, out.t).ok);
}

TEST(KernelTrilu, UpperLowerOffsets) {
  uint32_t seed = 1200;
  for (DType dt : {DType::F32, DType::I64, DType::Bool})
    for (bool upper : {true, false})
      for (int64_t k : {-1, 0, 2, -7, 9}) {
        Buf x = randomBuf(dt, {2, 5, 7}, seed++, dt == DType::Bool ? 0 : -5,
                          dt == DType::Bool ? 1 : 5);
        Buf out(dt, {2, 5, 7});
        ASSERT_TRUE(trilu(x.t, upper, k, out.t).ok);
        std::vector<double> ref;
        for (int64_t i = 0; i < x.n(); ++i) {
          int64_t r = (i / 7) % 5, c = i % 7;
          bool keep = upper ? c - r >= k : c - r <= k;
          ref.push_back(keep ? x.get(i) : 0);
        }
        expectExact(out, ref, std::string(dtypeName(dt)) + (upper ? " upper " : " lower ") +
                                  std::to_string(k));
      }
  // In place.
  Buf x = fromValues(DType::F32, {2, 2}, {1, 2, 3, 4});
  ASSERT_TRUE(trilu(x.t, true, 0, x.t).ok);
  expectExact(x, {1, 2, 0, 4});
}

//===----------------------------------------------------------------------===//
// data movement
//===----------------------------------------------------------------------===//

std::vector<double> refTranspose(const Buf &x, const std::vector<int64_t> &perm,
                                 const Shape &os) {
  std::vector<double> ref(static_cast<size_t>(x.n()));
  for (int64_t o = 0; o < x.n(); ++o) {
    std::vector<int64_t> oi = unravel(o, os), xi(perm.size());
    for (size_t d = 0; d < perm.size(); ++d)
      xi[size_t(perm[d])] = oi[d];
    ref[size_t(o)] = x.get(ravel(xi, x.t.shape));
  }
  return ref;
}

TEST(KernelTranspose, EveryRank4Perm) {
  Shape s = {2, 3, 4, 5};
  std::vector<int64_t> perm = {0, 1, 2, 3};
  uint32_t seed = 1300;
  do {
    for (DType dt : {DType::F32, DType::I64, DType::I8}) {
      Buf x = randomBuf(dt, s, seed++, dt == DType::F32 ? -1 : -100, dt == DType::F32 ? 1 : 100);
      Shape os;
      for (int64_t p : perm)
        os.push_back(s[size_t(p)]);
      Buf out(dt, os);
      ASSERT_TRUE(transpose(x.t, perm, out.t).ok);
      expectExact(out, refTranspose(x, perm, os),
                  std::string(dtypeName(dt)) + " perm " + std::to_string(perm[0]) +
                      std::to_string(perm[1]) + std::to_string(perm[2]) +
                      std::to_string(perm[3]));
    }
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(KernelTranspose, LargeAndHalf) {
  struct Case {
    Shape s;
    std::vector<int64_t> perm;
  };
  uint32_t seed = 1400;
  for (Case c : {Case{{4, 64, 12, 33}, {0, 2, 1, 3}}, Case{{4, 12, 64, 33}, {0, 1, 3, 2}},
                 Case{{300, 301}, {1, 0}}, Case{{8, 1, 70, 65}, {3, 1, 0, 2}},
                 Case{{1, 1, 1}, {2, 0, 1}}}) {
    Buf x = randomBuf(DType::F32, c.s, seed++);
    Shape os;
    for (int64_t p : c.perm)
      os.push_back(c.s[size_t(p)]);
    Buf out(DType::F32, os);
    ASSERT_TRUE(transpose(x.t, c.perm, out.t).ok);
    expectExact(out, refTranspose(x, c.perm, os), formatShape(c.s));
    // Same movement on 2-byte elements.
    Buf h(DType::F16, c.s), ho(DType::F16, os);
    for (int64_t i = 0; i < h.n(); ++i)
      h.p<uint16_t>()[i] = uint16_t(i * 2654435761u >> 7);
    ASSERT_TRUE(transpose(h.t, c.perm, ho.t).ok);
    Buf hi(DType::I32, c.s);
    for (int64_t i = 0; i < h.n(); ++i)
      hi.p<int32_t>()[i] = h.p<uint16_t>()[i];
    std::vector<double> ref = refTranspose(hi, c.perm, os);
    int failures = 0;
    for (int64_t i = 0; i < ho.n(); ++i)
      failures += ho.p<uint16_t>()[i] != uint16_t(ref[size_t(i)]);
    EXPECT_EQ(failures, 0) << "f16 " << formatShape(c.s);
  }
}

TEST(KernelSlice, NegativeStrides) {
  uint32_t seed = 1500;
  struct Case {
    Shape x, out;
    std::vector<int64_t> starts, strides;
  };
  for (Case c : {Case{{5, 6, 7}, {5, 3, 3}, {4, 1, 6}, {-1, 2, -3}},
                 Case{{5, 6, 7}, {2, 6, 7}, {1, 0, 0}, {2, 1, 1}},
                 Case{{10, 9}, {3, 9}, {9, 8}, {-3, -1}},
                 Case{{200, 300}, {100, 150}, {199, 1}, {-2, 2}},
                 Case{{4}, {0}, {0}, {1}}})
    for (DType dt : {DType::F32, DType::I64, DType::I8}) {
      Buf x = randomBuf(dt, c.x, seed++, -100, 100);
      Buf out(dt, c.out);
      ASSERT_TRUE(slice(x.t, c.starts, c.strides, out.t).ok);
      std::vector<double> ref;
      for (int64_t o = 0; o < out.n(); ++o) {
        std::vector<int64_t> oi = unravel(o, c.out), xi(oi.size());
        for (size_t d = 0; d < oi.size(); ++d)
          xi[d] = c.starts[d] + oi[d] * c.strides[d];
        ref.push_back(x.get(ravel(xi, c.x)));
      }
      expectExact(out, ref, formatShape(c.x) + " -> " + formatShape(c.out));
    }
}

TEST(KernelConcatSplit, AxesAndRoundTrip) {
  uint32_t seed = 1600;
  for (int64_t axis : {0, 1, 2})
    for (DType dt : {DType::F32, DType::I8, DType::F64}) {
      std::vector<Buf> parts;
      std::vector<int64_t> sizes = {2, 0, 3, 1};
      Shape os = {3, 4, 5};
      os[size_t(axis)] = 6;
      for (int64_t n : sizes) {
        Shape s = os;
        s[size_t(axis)] = n;
        parts.push_back(randomBuf(dt, s, seed++, -100, 100));
      }
      std::vector<const Tensor *> ins;
      for (const Buf &b : parts)
        ins.push_back(&b.t);
      Buf out(dt, os);
      ASSERT_TRUE(concat(ins, axis, out.t).ok);
      std::vector<double> ref(static_cast<size_t>(out.n()));
      for (int64_t o = 0; o < out.n(); ++o) {
        std::vector<int64_t> oi = unravel(o, os);
        int64_t pos = oi[size_t(axis)];
        size_t p = 0;
        while (pos >= sizes[p]) {
          pos -= sizes[p];
          ++p;
        }
        oi[size_t(axis)] = pos;
        ref[size_t(o)] = parts[p].get(ravel(oi, parts[p].t.shape));
      }
      expectExact(out, ref, "concat axis " + std::to_string(axis));
      // split back
      std::vector<Buf> back;
      std::vector<Tensor *> outs;
      for (const Buf &b : parts)
        back.push_back(Buf(dt, b.t.shape));
      for (Buf &b : back)
        outs.push_back(&b.t);
      ASSERT_TRUE(split(out.t, axis, outs).ok);
      for (size_t i = 0; i < parts.size(); ++i)
        expectExact(back[i], parts[i].values(), "split axis " + std::to_string(axis));
    }
}

TEST(KernelExpand, Broadcast) {
  struct Case {
    Shape x, out;
  };
  uint32_t seed = 1700;
  for (Case c : {Case{{3, 1}, {2, 3, 4}}, Case{{}, {5}}, Case{{4}, {3, 4}},
                 Case{{2, 1, 3}, {2, 4, 3}}, Case{{1, 600}, {100, 600}}})
    for (DType dt : {DType::F32, DType::Bool, DType::I64}) {
      Buf x = randomBuf(dt, c.x, seed++, dt == DType::Bool ? 0 : -9, dt == DType::Bool ? 1 : 9);
      Buf out(dt, c.out);
      ASSERT_TRUE(expand(x.t, out.t).ok);
      std::vector<double> ref;
      for (int64_t i = 0; i < out.n(); ++i)
        ref.push_back(x.get(broadcastIndex(c.x, c.out, i)));
      expectExact(out, ref, formatShape(c.x) + " -> " + formatShape(c.out));
    }
}

TEST(KernelCopy, Reshape) {
  Buf x = randomBuf(DType::F32, {3, 4, 5}, 1);
  Buf out(DType::F32, {12, 5});
  ASSERT_TRUE(copy(x.t, out.t).ok);
  expectExact(out, x.values());
  Buf big = randomBuf(DType::I64, {300000}, 2, -5, 5);
  Buf bo(DType::I64, {600, 500});
  ASSERT_TRUE(copy(big.t, bo.t).ok);
  expectExact(bo, big.values());
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
  expectTypeError(layerNorm(d.t, d.t, nullptr, 1, 1e-5f, dout.t), "layerNorm f64");
  expectTypeError(rmsNorm(h.t, h.t, 1e-5f, ho.t), "rmsNorm f16");
  expectTypeError(softmax(i64.t, 1, i64o.t), "softmax i64");
  expectTypeError(reduce(ReduceKind::Sum, i8.t, {1}, i8o.t), "reduce i8");
  Buf q(DType::F64, {1, 1, 2, 2});
  Buf qo(DType::F64, {1, 1, 2, 2});
  expectTypeError(attention(q.t, q.t, q.t, nullptr, 1.0f, false, qo.t), "attention f64");
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
  std::vector<std::vector<float>> attn, lin, sm, ln, mm;
  for (int threads : {1, 2, 4}) {
    setNumThreads(threads);
    EXPECT_EQ(getNumThreads(), threads);
    Buf ao(DType::F32, {2, 8, 130, 64});
    ASSERT_TRUE(attention(q.t, k.t, v.t, &mask.t, 0.125f, true, ao.t).ok);
    attn.emplace_back(ao.p<float>(), ao.p<float>() + ao.n());
    Buf lo(DType::F32, {4, 100, 384});
    ASSERT_TRUE(linear(x.t, w.t, &bias.t, true, lo.t).ok);
    lin.emplace_back(lo.p<float>(), lo.p<float>() + lo.n());
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
    EXPECT_EQ(attn[0], attn[i]) << "attention differs with thread setting " << i;
    EXPECT_EQ(lin[0], lin[i]) << "linear differs with thread setting " << i;
    EXPECT_EQ(mm[0], mm[i]) << "matmul differs with thread setting " << i;
    EXPECT_EQ(sm[0], sm[i]) << "softmax differs with thread setting " << i;
    EXPECT_EQ(ln[0], ln[i]) << "layerNorm differs with thread setting " << i;
  }
}

} // namespace
