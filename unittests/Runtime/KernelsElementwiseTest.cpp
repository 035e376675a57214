//===- KernelsElementwiseTest.cpp - CPU elementwise kernels
//-----------------===//
//
// binary, compare, where, unary and cast, Checked against references written
// here in double precision; see KernelTestUtil.h.
//
//===----------------------------------------------------------------------===//
#include "KernelTestUtil.h"

using namespace mp::rt;
using namespace mp::rt::cpu;
using namespace mp::rt::test;

namespace {

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
      expectExact(out, ref,
                  std::string(dtypeName(dt)) + " kind " +
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
  const CompareKind kinds[] = {CompareKind::Eq, CompareKind::Ne,
                               CompareKind::Lt, CompareKind::Le,
                               CompareKind::Gt, CompareKind::Ge};
  uint32_t seed = 100;
  for (DType dt :
       {DType::F32, DType::F64, DType::I64, DType::I32, DType::I8, DType::Bool})
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
    Buf a = randomBuf(dt, {3, 1}, 6, dt == DType::Bool ? 0 : -5,
                      dt == DType::Bool ? 1 : 5);
    Buf b = randomBuf(dt, {6}, 7, dt == DType::Bool ? 0 : -5,
                      dt == DType::Bool ? 1 : 5);
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
  Buf la = randomBuf(DType::F32, {50000}, 9),
      lb = randomBuf(DType::F32, {50000}, 10);
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
    UnaryKind::Neg,      UnaryKind::Exp,   UnaryKind::Log,
    UnaryKind::Sqrt,     UnaryKind::Rsqrt, UnaryKind::Reciprocal,
    UnaryKind::Tanh,     UnaryKind::Erf,   UnaryKind::Sigmoid,
    UnaryKind::Relu,     UnaryKind::Silu,  UnaryKind::Gelu,
    UnaryKind::GeluTanh, UnaryKind::Cos,   UnaryKind::Sin};

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
  for (UnaryKind k :
       {UnaryKind::Exp, UnaryKind::Tanh, UnaryKind::Sigmoid, UnaryKind::Silu,
        UnaryKind::GeluTanh, UnaryKind::Gelu, UnaryKind::Erf}) {
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
    double rtol = k == UnaryKind::GeluTanh ? 3e-5
                  : k == UnaryKind::Gelu   ? 2e-6
                                           : 4e-7;
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
    return uint16_t(sign |
                    (a >= decode(maxCode) + ulp / 2 ? infCode : maxCode));
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
      ASSERT_TRUE(cast(x.t, out.t).ok)
          << dtypeName(from) << "->" << dtypeName(to);
      for (size_t i = 0; i < vals.size(); ++i) {
        double v = from == DType::Bool ? (vals[i] != 0) : vals[i];
        double expect = to == DType::Bool ? (v != 0) : v;
        EXPECT_EQ(getAny(out, int64_t(i)), expect)
            << dtypeName(from) << "->" << dtypeName(to) << " value " << v;
      }
    }
}

TEST(KernelCast, FloatToIntTruncatesAndBool) {
  Buf x = fromValues(DType::F32, {8},
                     {2.7, -2.7, 0.5, -0.5, 0, 126.9, -1e-30, NAN});
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
        failures += !std::isnan(got) ||
                    !std::isnan(decode(back.p<uint16_t>()[i])) ||
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
    vals.push_back(
        (decodeHalf(uint16_t(code)) + decodeHalf(uint16_t(code + 1))) / 2);
  vals.push_back(65504);
  vals.push_back(65519.99);
  vals.push_back(65520);
  vals.push_back(std::ldexp(1.0, -25)); // tie to 0
  vals.push_back(std::ldexp(3.0, -25)); // tie to 2^-23
  vals.push_back(1e-10);
  for (DType src : {DType::F32, DType::F64}) {
    Buf x(src, {int64_t(vals.size())});
    for (size_t i = 0; i < vals.size(); ++i)
      x.set(int64_t(i), vals[i]);
    Buf h(DType::F16, x.t.shape);
    ASSERT_TRUE(cast(x.t, h.t).ok);
    int failures = 0;
    for (size_t i = 0; i < vals.size(); ++i) {
      uint16_t want =
          nearestCode(x.get(int64_t(i)), decodeHalf, 0x7bff, 0x7c00);
      if (h.p<uint16_t>()[i] != want && failures++ < 5)
        ADD_FAILURE() << dtypeName(src) << " " << x.get(int64_t(i))
                      << " -> f16 " << h.p<uint16_t>()[i] << ", want " << want;
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
    bv.push_back((decodeBf16(uint16_t(code)) + decodeBf16(uint16_t(code + 1))) /
                 2);
  for (DType src : {DType::F32, DType::F64}) {
    Buf x(src, {int64_t(bv.size())});
    for (size_t i = 0; i < bv.size(); ++i)
      x.set(int64_t(i), bv[i]);
    Buf h(DType::BF16, x.t.shape);
    ASSERT_TRUE(cast(x.t, h.t).ok);
    int failures = 0;
    for (size_t i = 0; i < bv.size(); ++i) {
      uint16_t want =
          nearestCode(x.get(int64_t(i)), decodeBf16, 0x7f7f, 0x7f80);
      if (h.p<uint16_t>()[i] != want && failures++ < 5)
        ADD_FAILURE() << dtypeName(src) << " " << x.get(int64_t(i))
                      << " -> bf16 " << h.p<uint16_t>()[i] << ", want " << want;
    }
    EXPECT_EQ(failures, 0);
  }
}

} // namespace

namespace {

/// The float inputs where transcendental kernels go wrong: zeros,
/// subnormals, the smallest and largest normals, where exp over- and
/// underflows, where x^2 overflows, infinities and NaN.
std::vector<float> edgeValues() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          std::numeric_limits<float>::denorm_min(),
                          1e-40f,
                          std::numeric_limits<float>::min(),
                          1e-30f,
                          1e-7f,
                          0.5f,
                          1.0f,
                          3.0f,
                          9.5f,
                          15.5f,
                          30.0f,
                          87.0f,
                          88.8f,
                          89.5f,
                          104.0f,
                          200.0f,
                          1e10f,
                          1.9e19f,
                          1e30f,
                          std::numeric_limits<float>::max(),
                          inf};
  size_t n = v.size();
  for (size_t i = 0; i < n; ++i)
    v.push_back(-v[i]);
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  return v;
}

/// The mathematical value in long double (the limit at the infinities, where
/// the formula would give inf * 0).
long double refEdge(UnaryKind k, long double x) {
  const long double inf = std::numeric_limits<long double>::infinity();
  const long double sqrtHalf = 0.70710678118654752440084436210484903928L;
  switch (k) {
  case UnaryKind::Exp: return std::exp(x);
  case UnaryKind::Log: return std::log(x);
  case UnaryKind::Sqrt: return std::sqrt(x);
  case UnaryKind::Rsqrt: return 1.0L / std::sqrt(x);
  case UnaryKind::Reciprocal: return 1.0L / x;
  case UnaryKind::Tanh: return std::tanh(x);
  case UnaryKind::Erf: return std::erf(x);
  case UnaryKind::Sigmoid: return 1.0L / (1.0L + std::exp(-x));
  case UnaryKind::Silu: return x == -inf ? -0.0L : x / (1.0L + std::exp(-x));
  case UnaryKind::Gelu:
    return x == -inf ? -0.0L : 0.5L * x * std::erfc(-x * sqrtHalf);
  case UnaryKind::GeluTanh: {
    if (x == -inf)
      return -0.0L;
    long double u =
        0.79788456080286535587989211986876373L * (x + 0.044715L * x * x * x);
    return x / (1.0L + std::exp(-2.0L * u));
  }
  default: return std::numeric_limits<long double>::quiet_NaN();
  }
}

/// `got` against the exact `want` at an edge: NaN where it is NaN,
/// infinities and zeros exactly (and, with `sameSign`, with their sign),
/// else within `relTol` plus `subnormalSteps` of the smallest subnormal.
template <typename T>
void expectEdge(T got, T want, T relTol, int subnormalSteps,
                const std::string &what, bool sameSign = false) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got;
  } else if (std::isinf(want) || want == T(0)) {
    EXPECT_EQ(got, want) << what;
    if (sameSign) {
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << what;
    }
  } else {
    EXPECT_LE(std::fabs(got - want),
              relTol * std::fabs(want) +
                  subnormalSteps * std::numeric_limits<T>::denorm_min())
        << what << ": got " << got << ", want " << want;
  }
}

/// Every float transcendental kernel at the edges of the float range, against
/// long double math: NaN where it is NaN, infinities and zeros exactly,
/// else within 4 float ulps (relative 5e-7, or 2 subnormal steps).
TEST(KernelUnary, FloatEdgesAgainstLongDouble) {
  std::vector<float> xs = edgeValues();
  Buf x(DType::F32, {int64_t(xs.size())}), y(DType::F32, x.t.shape);
  std::memcpy(x.t.data, xs.data(), xs.size() * 4);
  for (UnaryKind k : {UnaryKind::Exp, UnaryKind::Log, UnaryKind::Sqrt,
                      UnaryKind::Rsqrt, UnaryKind::Reciprocal, UnaryKind::Tanh,
                      UnaryKind::Erf, UnaryKind::Sigmoid, UnaryKind::Silu,
                      UnaryKind::Gelu, UnaryKind::GeluTanh}) {
    ASSERT_TRUE(unary(k, x.t, y.t).ok);
    for (size_t i = 0; i < xs.size(); ++i) {
      float got = y.p<float>()[i];
      float want = static_cast<float>(refEdge(k, xs[i]));
      expectEdge(got, want, 5e-7f, 2,
                 "kind " + std::to_string(static_cast<int>(k)) + " at " +
                     std::to_string(xs[i]) + " (" + std::to_string(i) + ")");
    }
  }
}

/// The fp64 kernels (libm) at the same edges, and at -inf the limits.
TEST(KernelUnary, DoubleEdgesAgainstLongDouble) {
  std::vector<float> xs = edgeValues();
  Buf x(DType::F64, {int64_t(xs.size())}), y(DType::F64, x.t.shape);
  for (size_t i = 0; i < xs.size(); ++i)
    x.p<double>()[i] = xs[i];
  for (UnaryKind k : {UnaryKind::Erf, UnaryKind::Sigmoid, UnaryKind::Silu,
                      UnaryKind::Gelu, UnaryKind::GeluTanh, UnaryKind::Tanh}) {
    ASSERT_TRUE(unary(k, x.t, y.t).ok);
    for (size_t i = 0; i < xs.size(); ++i) {
      double got = y.p<double>()[i];
      double want = static_cast<double>(refEdge(k, xs[i]));
      expectEdge(got, want, 1e-13, 4,
                 "kind " + std::to_string(static_cast<int>(k)) + " at " +
                     std::to_string(xs[i]));
    }
  }
}

/// pow at the edges, as C's pow (and numpy's power) defines them: every
/// pair of edge values, the exponent as a tensor and as a scalar (which
/// takes the x*x, x*x*x and x shortcuts for 2, 3 and 1), against long
/// double pow: NaN where it is NaN, infinities and zeros exactly (with
/// their signs), else within 2 float ulps plus one subnormal step.
TEST(KernelBinary, PowAtTheEdgesAgainstLongDouble) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> bases = edgeValues();
  std::vector<float> exponents = {0.0f,
                                  -0.0f,
                                  0.5f,
                                  1.0f,
                                  2.0f,
                                  3.0f,
                                  -1.0f,
                                  -2.0f,
                                  2.5f,
                                  1e10f,
                                  inf,
                                  -inf,
                                  std::numeric_limits<float>::quiet_NaN()};
  auto check = [&](float x, float y, float got) {
    float want = static_cast<float>(
        std::pow(static_cast<long double>(x), static_cast<long double>(y)));
    expectEdge(got, want, 2.5e-7f, 1,
               "pow(" + std::to_string(x) + ", " + std::to_string(y) + ")",
               /*sameSign=*/true);
  };
  int64_t n = static_cast<int64_t>(bases.size());
  Buf x(DType::F32, {n}), out(DType::F32, {n});
  std::memcpy(x.t.data, bases.data(), bases.size() * 4);
  for (float y : exponents) {
    Buf scalar = fromValues(DType::F32, {}, {y});
    ASSERT_TRUE(binary(BinaryKind::Pow, x.t, scalar.t, out.t).ok);
    for (int64_t i = 0; i < n; ++i)
      check(bases[i], y, out.p<float>()[i]);
    Buf full(DType::F32, {n});
    for (int64_t i = 0; i < n; ++i)
      full.p<float>()[i] = y;
    ASSERT_TRUE(binary(BinaryKind::Pow, x.t, full.t, out.t).ok);
    for (int64_t i = 0; i < n; ++i)
      check(bases[i], y, out.p<float>()[i]);
  }
}

} // namespace
