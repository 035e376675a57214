//===- Float16.h - fp16 and bf16 conversions --------------------*- C++ -*-===//
//
// Scalar conversions between fp32/fp64 and the 16-bit float formats, rounding
// to nearest even, NaN kept quiet. One definition for the runtime's kernels,
// the importer's constant folder and the artifact writer.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_FLOAT16_H
#define MP_SUPPORT_FLOAT16_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace mp {

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    float v = float(mant) * 5.9604644775390625e-8f; // 2^-24
    return sign ? -v : v;
  }
  if (exp == 31)
    return bitsFloat(sign | 0x7f800000u | (mant << 13));
  return bitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToHalf(float f) {
  uint32_t x = floatBits(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) // NaN: keep it quiet
    return uint16_t(sign | 0x7e00 | ((ax >> 13) & 0x3ff));
  if (ax >= 0x477ff000u) // >= 65520 rounds to infinity
    return uint16_t(sign | 0x7c00);
  if (ax < 0x38800000u) {                  // below 2^-14: subnormal (or zero)
    float v = bitsFloat(ax) * 16777216.0f; // exact: scale by 2^24
    return uint16_t(sign | uint16_t(std::nearbyint(v)));
  }
  uint32_t rounded = ax + 0xfffu + ((ax >> 13) & 1u);
  return uint16_t(sign | ((rounded - (112u << 23)) >> 13));
}

inline float bf16ToFloat(uint16_t h) { return bitsFloat(uint32_t(h) << 16); }

inline uint16_t floatToBf16(float f) {
  uint32_t x = floatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// Rounds x to `p` significant bits with minimum normal exponent `emin`
/// (subnormals keep the absolute precision 2^(emin-p+1)). Exact in double.
inline double roundToPrecision(double x, int p, int emin) {
  if (x == 0 || !std::isfinite(x))
    return x;
  int e;
  std::frexp(x, &e); // x = f * 2^e, f in [0.5, 1)
  int ulpExp = std::max(e - 1, emin) - p + 1;
  return std::ldexp(std::nearbyint(std::ldexp(x, -ulpExp)), ulpExp);
}

inline uint16_t doubleToHalf(double d) {
  if (std::isnan(d))
    return floatToHalf(float(d));
  return floatToHalf(float(roundToPrecision(d, 11, -14)));
}
inline uint16_t doubleToBf16(double d) {
  if (std::isnan(d))
    return floatToBf16(float(d));
  return floatToBf16(float(roundToPrecision(d, 8, -126)));
}

} // namespace mp

#endif // MP_SUPPORT_FLOAT16_H
