//===- IntegerArithmetic.h - integer binary ops everywhere ------*- C++ -*-===//
//
// The integer semantics of the binary ops, shared by the CPU kernels, the
// CUDA kernels (compiled as host and device code there) and the importer's
// constant folding, so a folded value is the one a run computes:
// two's-complement wrap-around instead of undefined overflow, truncating
// division that never traps, exact integer powers, and float-to-integer casts
// that saturate instead of being undefined.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_INTEGERARITHMETIC_H
#define MP_SUPPORT_INTEGERARITHMETIC_H

#include "mp/Support/HostDevice.h"

#include <cstdint>
#include <type_traits>

namespace mp::rt {

template <class T> MP_HOST_DEVICE inline T wrapAdd(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) + U(b));
}
template <class T> MP_HOST_DEVICE inline T wrapSub(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) - U(b));
}
template <class T> MP_HOST_DEVICE inline T wrapMul(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return T(U(a) * U(b));
}
template <class T> MP_HOST_DEVICE inline T intDiv(T a, T b) {
  if (b == 0)
    return 0; // undefined; never trap
  if (b == -1)
    return wrapSub<T>(0, a);
  return T(a / b);
}
template <class T> MP_HOST_DEVICE inline T intPow(T base, T exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp & 1) ? T(-1) : T(1);
    return 0; // |1 / base^n| < 1 truncates to 0 (base 0: undefined)
  }
  T result = 1;
  while (exp) {
    if (exp & 1)
      result = wrapMul(result, base);
    exp = T(exp >> 1);
    if (exp)
      base = wrapMul(base, base);
  }
  return result;
}

/// A float cast to integer type I: truncated toward zero, NaN to 0, values
/// outside int64 saturated to its range, then narrowed with wrap-around.
template <class I> MP_HOST_DEVICE inline I saturatingToInt(double v) {
  if (v != v)
    return 0;
  if (v >= 9.2233720368547758e18)
    return I(INT64_MAX);
  if (v <= -9.2233720368547758e18)
    return I(INT64_MIN);
  return I(static_cast<int64_t>(v));
}

} // namespace mp::rt

#endif // MP_SUPPORT_INTEGERARITHMETIC_H
