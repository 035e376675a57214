//===- FastMath.h - vectorizable float math for the CPU kernels ---*- C++
//-*-===//
//
// Private to lib/Runtime/cpu. glibc's expf/tanhf/erff do not vectorize
// without -ffast-math, so the float activations and their gradients use
// branch-free Cephes-style approximations that the compiler turns into SIMD
// code (max relative error measured over [-16, 16]: exp 8e-8, tanh 1.3e-7,
// sigmoid 1.9e-7, silu 2.3e-7, erf 1.7e-7, gelu 8.4e-7). Every finite and
// infinite input gives the mathematical value (the limit at the
// infinities), NaN gives NaN (KernelUnary.FloatEdgesAgainstLongDouble).
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_CPU_FASTMATH_H
#define MP_LIB_RUNTIME_CPU_FASTMATH_H

#include "Common.h"

#include <cmath>
#include <cstdint>

namespace mp::rt::cpu::fastmath {

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

/// Φ(x) = 0.5 (1 + erf(x / sqrt2)), the standard normal CDF, from erfc for
/// |x| >= sqrt2 so that the negative tail keeps its relative accuracy.
inline float normalCdf(float x) {
  const float t = x * -0.70710678118654752f;
  const float a = std::fabs(t);
  const float small = 0.5f * (1.0f - erfSmall(t));
  const float xc = x > 15.0f ? 15.0f : x < -15.0f ? -15.0f : x;
  const float sq = xc * xc, sqLo = std::fma(xc, xc, -sq);
  const float ec = erfcLarge(a, 0.5f * sq, 0.5f * sqLo);
  const float large = 0.5f * (t > 0.0f ? ec : 2.0f - ec);
  return a < 1.0f ? small : large;
}

/// d/dx of x Φ(x): Φ(x) + x φ(x). Past |x| = 15, x φ(x) is below 1e-47:
/// x is clamped there so that x² cannot overflow (NaN passes).
inline float geluErfGrad(float x) {
  const float xc = x > 15.0f ? 15.0f : x < -15.0f ? -15.0f : x;
  return normalCdf(x) +
         xc * expFast(-0.5f * xc * xc) * 0.39894228040143268f; // 1/sqrt(2pi)
}

/// d/dx of ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³). Past |x| = 10,
/// tanh u is ±1 in float and the second term 0: x is clamped there so
/// that x³ cannot overflow.
inline float geluTanhGrad(float x) {
  const float c = 0.79788456080286536f, k = 0.044715f;
  const float xc = x > 10.0f ? 10.0f : x < -10.0f ? -10.0f : x;
  const float t = tanhFast(c * (xc + k * xc * xc * xc));
  return 0.5f * (1.0f + t) +
         0.5f * xc * (1.0f - t * t) * c * (1.0f + 3.0f * k * xc * xc);
}

} // namespace mp::rt::cpu::fastmath

#endif // MP_LIB_RUNTIME_CPU_FASTMATH_H
