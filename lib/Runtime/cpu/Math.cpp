//===- Math.cpp - unary CPU kernels and vectorizable float math -----------===//
//
// glibc's expf/tanhf/erff do not vectorize without -ffast-math, so the float
// activations use branch-free Cephes-style approximations that the compiler
// turns into SIMD code (max relative error measured over [-16, 16]: exp 8e-8,
// tanh 1.3e-7, sigmoid 1.9e-7, silu 2.3e-7, erf 1.7e-7, gelu 8.4e-7). Every
// finite and infinite input gives the mathematical value (the limit at the
// infinities), NaN gives NaN (KernelUnary.FloatEdgesAgainstLongDouble). The
// same exp serves softmax, attention and cross-entropy (detail::expSubSum).
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "mp/Runtime/Kernels.h"

#include "OpenMP.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mp::rt::cpu {
namespace {

inline float bitsToFloat(int32_t u) { return bitCast<float>(u); }
inline int32_t floatToBits(float f) { return bitCast<int32_t>(f); }

/// exp(x), ~1 ulp for normal results; NaN propagates, +-inf give inf / 0.
/// Branch-free so that loops over it vectorize.
inline float expFast(float x) {
  // Clamp (NaN passes through both compares); beyond the range the result
  // is 0 or inf anyway.
  float xc = x < -110.0f ? -110.0f : x;
  xc = xc > 89.0f ? 89.0f : xc;
  // n = round(x / ln2) with the 1.5 * 2^23 trick: the integer sits in the
  // low mantissa bits (std::floor/nearbyint do not vectorize with trapping
  // math, and a float->int conversion of NaN would be undefined).
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float fx = t - 12582912.0f;
  const int32_t n =
      static_cast<int32_t>(static_cast<uint32_t>(floatToBits(t)) - 0x4b400000u);
  float r = xc - fx * 0.693359375f;
  r = r + fx * 2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  // 2^n as two factors so that n in [-159, 128] stays representable.
  // (Unsigned shifts: for NaN input n is garbage, and the result NaN anyway.)
  const int32_t n1 = n >> 1, n2 = n - n1;
  const auto pow2 = [](int32_t e) {
    return bitsToFloat(
        static_cast<int32_t>((static_cast<uint32_t>(e) + 127u) << 23));
  };
  return y * pow2(n1) * pow2(n2);
}

/// tanh(x): odd polynomial near 0, 1 - 2/(e^2|x| + 1) elsewhere.
inline float tanhFast(float x) {
  const float ax = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float e = expFast(2.0f * ax);
  float large = 1.0f - 2.0f / (e + 1.0f);
  large = std::copysign(large, x);
  return ax < 0.625f ? small : large;
}

/// 1 / (1 + e^-x), computed from e^-|x| so that the tail keeps its relative
/// accuracy for negative x.
inline float sigmoidFast(float x) {
  const float e = expFast(-std::fabs(x));
  const float s = 1.0f / (1.0f + e);
  return x >= 0.0f ? s : e * s;
}

/// sigmoid(hi + lo) for |lo| << |hi|: e^-|x| = e^-|hi| e^-+lo, so that an
/// argument known beyond float precision keeps its accuracy in the tail.
inline float sigmoidSplit(float hi, float lo) {
  const float e =
      expFast(-std::fabs(hi)) * (hi >= 0.0f ? 1.0f - lo : 1.0f + lo);
  const float s = 1.0f / (1.0f + e);
  return hi >= 0.0f ? s : e * s;
}

/// sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3), with 2u formed in
/// float-float arithmetic (FMA error terms; it vectorizes, unlike double),
/// because the tail needs 2u to better than float precision: rounded to
/// float, 2u = -76 at x = -9.5 is off by 7.6e-6, and so is the result.
inline float sigmoidSplit2u(float x) {
  // Past |x| = 100 the sigmoid is 0 or 1 in float; the clamp keeps x^2
  // finite (NaN passes the compares).
  const float v = x > 100.0f ? 100.0f : x < -100.0f ? -100.0f : x;
  const float t = v * v, te = std::fma(v, v, -t);     // v^2 = t + te
  const float a = 0.0447149985f, al = 1.54614448e-9f; // 0.044715
  const float p = a * t, pe = std::fma(a, t, -p) + a * te + al * t; // a v^2
  const float q = 1.0f + p, bb = q - 1.0f;                          // 1 + a v^2
  const float qe = (1.0f - (q - bb)) + (p - bb) + pe;
  const float kh = 1.59576917f, kl = -4.53406803e-8f; // 2 sqrt(2/pi)
  const float m = kh * v, me = std::fma(kh, v, -m) + kl * v;
  const float r = m * q, re = std::fma(m, q, -r) + m * qe + me * q;
  const float hi = r + re, lo = re - (hi - r);
  return sigmoidSplit(hi, lo);
}

/// x * sigmoid(x) far in the negative tail, where sigmoid(x) = e^x would
/// underflow before the product does: (x e^(x+64)) e^-64.
inline float siluTail(float x) {
  return (x * expFast(x + 64.0f)) * 1.60381089e-28f;
}

/// erf(t) = t T(t^2) for |t| < 1 (Cephes erff).
inline float erfSmall(float t) {
  const float z = t * t;
  float p = 7.853861353153693e-5f;
  p = p * z - 8.010193625184903e-4f;
  p = p * z + 5.188327685732524e-3f;
  p = p * z - 2.685381193529856e-2f;
  p = p * z + 1.128358514861418e-1f;
  p = p * z - 3.761262582423300e-1f;
  p = p * z + 1.128379165726710e+0f;
  return t * p;
}

/// erfc(a) for a >= 1 (Cephes erfcf: exp(-a^2) / a * P(1/a^2)), given
/// a^2 = sqHi + sqLo exactly so that exp(-a^2) keeps full accuracy.
inline float erfcLarge(float a, float sqHi, float sqLo) {
  const float ac = a < 1.0f ? 1.0f : a;
  const float q = 1.0f / ac, y = q * q;
  float p = 2.326819970068386e-2f; // 1 <= a < 2
  p = p * y - 1.387039388740657e-1f;
  p = p * y + 3.687424674597105e-1f;
  p = p * y - 5.824733027278666e-1f;
  p = p * y + 6.210004621745983e-1f;
  p = p * y - 4.944515323274145e-1f;
  p = p * y + 3.404879937665872e-1f;
  p = p * y - 2.741127028184656e-1f;
  p = p * y + 5.638259427386472e-1f;
  float r = -1.047766399936249e+1f; // a >= 2
  r = r * y + 1.297719955372516e+1f;
  r = r * y - 7.495518717768503e+0f;
  r = r * y + 2.921019019210786e+0f;
  r = r * y - 1.015265279202700e+0f;
  r = r * y + 4.218463358204948e-1f;
  r = r * y - 2.820767439740514e-1f;
  r = r * y + 5.641895067754075e-1f;
  const float e = expFast(-sqHi) * (1.0f - sqLo);
  return e * q * (ac < 2.0f ? p : r);
}

/// erf(x); beyond |x| = 10, erf is +-1 in float, and x^2 would overflow
/// (its low part NaN) past 1.8e19, so the argument is clamped (NaN passes
/// the compares unchanged).
inline float erfFast(float x) {
  x = x > 10.0f ? 10.0f : x < -10.0f ? -10.0f : x;
  const float a = std::fabs(x);
  const float sq = x * x, sqLo = std::fma(x, x, -sq);
  const float large = std::copysign(1.0f - erfcLarge(a, sq, sqLo), x);
  return a < 1.0f ? erfSmall(x) : large;
}

/// 0.5 x (1 + erf(x / sqrt2)) = 0.5 x erfc(t), t = -x / sqrt2: computed from
/// erfc for |t| >= 1 so that the negative tail keeps its relative accuracy.
inline float geluErf(float x) {
  const float t = x * -0.70710678118654752f;
  const float a = std::fabs(t);
  const float small = 0.5f * x * (1.0f - erfSmall(t));
  // t^2 = x^2 / 2, split exactly; past |x| = 15 erfc(|t|) is 0 in float (x^2
  // would overflow past 1.8e19), so x is clamped there (NaN passes).
  const float xc = x > 15.0f ? 15.0f : x < -15.0f ? -15.0f : x;
  const float sq = xc * xc, sqLo = std::fma(xc, xc, -sq);
  const float ec = erfcLarge(a, 0.5f * sq, 0.5f * sqLo);
  float large = 0.5f * x * (t > 0.0f ? ec : 2.0f - ec);
  large = x < -15.0f ? -0.0f : large; // |result| < 1e-45
  return a < 1.0f ? small : large;
}

template <class F> void mapParallel(const float *x, float *y, int64_t n, F f) {
  auto body = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = f(x[i]);
  };
  if (n >= kParallelMin && !omp_in_parallel() && omp_get_max_threads() > 1) {
#pragma omp parallel
    {
      int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt;
      chunk = (chunk + 15) / 16 * 16;
      int64_t b = std::min(n, t * chunk), e = std::min(n, b + chunk);
      body(b, e);
    }
  } else {
    body(0, n);
  }
}

template <class T, class F> void mapAny(const T *x, T *y, int64_t n, F f) {
  if (n >= kParallelMin / 4 && !omp_in_parallel() &&
      omp_get_max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i)
      y[i] = f(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i)
      y[i] = f(x[i]);
  }
}

void unaryF32(UnaryKind kind, const float *x, float *y, int64_t n) {
  switch (kind) {
  case UnaryKind::Neg: return mapParallel(x, y, n, [](float v) { return -v; });
  case UnaryKind::Exp:
    return mapParallel(x, y, n, [](float v) { return expFast(v); });
  case UnaryKind::Log:
    return mapAny(x, y, n, [](float v) { return std::log(v); });
  case UnaryKind::Sqrt:
    return mapParallel(x, y, n, [](float v) { return std::sqrt(v); });
  case UnaryKind::Rsqrt:
    return mapParallel(x, y, n, [](float v) { return 1.0f / std::sqrt(v); });
  case UnaryKind::Reciprocal:
    return mapParallel(x, y, n, [](float v) { return 1.0f / v; });
  case UnaryKind::Tanh:
    return mapParallel(x, y, n, [](float v) { return tanhFast(v); });
  case UnaryKind::Erf:
    return mapParallel(x, y, n, [](float v) { return erfFast(v); });
  case UnaryKind::Sigmoid:
    return mapParallel(x, y, n, [](float v) { return sigmoidFast(v); });
  case UnaryKind::Relu:
    return mapParallel(x, y, n, [](float v) { return v < 0.0f ? 0.0f : v; });
  case UnaryKind::Silu:
    // (-inf * sigmoid(-inf) would be NaN; the limit is -0.)
    return mapParallel(x, y, n, [](float v) {
      const float tail = v < -64.0f ? siluTail(v) : v * sigmoidFast(v);
      return v == -std::numeric_limits<float>::infinity() ? -0.0f : tail;
    });
  case UnaryKind::Gelu:
    return mapParallel(x, y, n, [](float v) { return geluErf(v); });
  case UnaryKind::GeluTanh:
    // 0.5 x (1 + tanh(u)) = x * sigmoid(2u): no cancellation for negative x.
    return mapParallel(x, y, n, [](float v) {
      return v == -std::numeric_limits<float>::infinity()
                 ? -0.0f
                 : v * sigmoidSplit2u(v);
    });
  case UnaryKind::Cos:
    return mapAny(x, y, n, [](float v) { return std::cos(v); });
  case UnaryKind::Sin:
    return mapAny(x, y, n, [](float v) { return std::sin(v); });
  }
}

void unaryF64(UnaryKind kind, const double *x, double *y, int64_t n) {
  switch (kind) {
  case UnaryKind::Neg: return mapAny(x, y, n, [](double v) { return -v; });
  case UnaryKind::Exp:
    return mapAny(x, y, n, [](double v) { return std::exp(v); });
  case UnaryKind::Log:
    return mapAny(x, y, n, [](double v) { return std::log(v); });
  case UnaryKind::Sqrt:
    return mapAny(x, y, n, [](double v) { return std::sqrt(v); });
  case UnaryKind::Rsqrt:
    return mapAny(x, y, n, [](double v) { return 1.0 / std::sqrt(v); });
  case UnaryKind::Reciprocal:
    return mapAny(x, y, n, [](double v) { return 1.0 / v; });
  case UnaryKind::Tanh:
    return mapAny(x, y, n, [](double v) { return std::tanh(v); });
  case UnaryKind::Erf:
    return mapAny(x, y, n, [](double v) { return std::erf(v); });
  case UnaryKind::Sigmoid:
    return mapAny(x, y, n, [](double v) { return 1.0 / (1.0 + std::exp(-v)); });
  case UnaryKind::Relu:
    return mapAny(x, y, n, [](double v) { return v < 0.0 ? 0.0 : v; });
  // (At -inf, x * (something tending to 0) is NaN; the limits are -0.)
  case UnaryKind::Silu:
    return mapAny(x, y, n, [](double v) {
      return v == -std::numeric_limits<double>::infinity()
                 ? -0.0
                 : v / (1.0 + std::exp(-v));
    });
  case UnaryKind::Gelu:
    return mapAny(x, y, n, [](double v) {
      return v == -std::numeric_limits<double>::infinity()
                 ? -0.0
                 : 0.5 * v * std::erfc(v * -0.70710678118654752440);
    });
  case UnaryKind::GeluTanh:
    // x * sigmoid(2u), as in fp32: no cancellation for negative x.
    return mapAny(x, y, n, [](double v) {
      double u = 0.79788456080286535588 * (v + 0.044715 * v * v * v);
      return v == -std::numeric_limits<double>::infinity()
                 ? -0.0
                 : v / (1.0 + std::exp(-2.0 * u));
    });
  case UnaryKind::Cos:
    return mapAny(x, y, n, [](double v) { return std::cos(v); });
  case UnaryKind::Sin:
    return mapAny(x, y, n, [](double v) { return std::sin(v); });
  }
}

template <class T> bool unaryInt(UnaryKind kind, const T *x, T *y, int64_t n) {
  using U = std::make_unsigned_t<T>;
  if (kind == UnaryKind::Neg) {
    mapAny(x, y, n, [](T v) { return T(U(0) - U(v)); });
    return true;
  }
  if (kind == UnaryKind::Relu) {
    mapAny(x, y, n, [](T v) { return v < 0 ? T(0) : v; });
    return true;
  }
  return false;
}

const char *unaryName(UnaryKind kind) {
  static const char *const names[] = {"neg",       "exp",        "log",  "sqrt",
                                      "rsqrt",     "reciprocal", "tanh", "erf",
                                      "sigmoid",   "relu",       "silu", "gelu",
                                      "gelu_tanh", "cos",        "sin"};
  return names[static_cast<int>(kind)];
}

} // namespace

float detail::expSubSum(const float *x, float shift, float *y, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {
    float e = expFast(x[i] - shift);
    y[i] = e;
    sum += e;
  }
  return sum;
}

float detail::expSubSumNoStore(const float *x, float shift, int64_t n) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += expFast(x[i] - shift);
  return sum;
}

float detail::maxOf(const float *x, int64_t n) {
  // Eight lanes in a GCC/Clang vector (max is exact in any order).
  typedef float V8 __attribute__((vector_size(32)));
  const float ninf = -std::numeric_limits<float>::infinity();
  V8 m = {ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    V8 v;
    std::memcpy(&v, x + i, sizeof v);
    m = v > m ? v : m;
  }
  float r = ninf;
  for (int l = 0; l < 8; ++l)
    r = m[l] > r ? m[l] : r;
  for (; i < n; ++i)
    r = x[i] > r ? x[i] : r;
  return r;
}

void detail::expInPlace(float *y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    y[i] = expFast(y[i]);
}

Status unary(UnaryKind kind, const Tensor &x, Tensor &out) {
  if (x.dtype != out.dtype)
    return Status::error(std::string("unary: element types differ (") +
                         dtypeName(x.dtype) + " and " + dtypeName(out.dtype) +
                         ")");
  const int64_t n = x.numel();
  switch (x.dtype) {
  case DType::F32:
    unaryF32(kind, x.as<const float>(), out.as<float>(), n);
    return Status::success();
  case DType::F64:
    unaryF64(kind, x.as<const double>(), out.as<double>(), n);
    return Status::success();
  case DType::I64:
    if (unaryInt(kind, x.as<const int64_t>(), out.as<int64_t>(), n))
      return Status::success();
    break;
  case DType::I32:
    if (unaryInt(kind, x.as<const int32_t>(), out.as<int32_t>(), n))
      return Status::success();
    break;
  case DType::I8:
    if (unaryInt(kind, x.as<const int8_t>(), out.as<int8_t>(), n))
      return Status::success();
    break;
  default: break;
  }
  return Status::error(std::string("unary ") + unaryName(kind) +
                       ": unsupported element type " + dtypeName(x.dtype));
}

} // namespace mp::rt::cpu
