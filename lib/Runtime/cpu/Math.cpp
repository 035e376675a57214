//===- Math.cpp - unary CPU kernels ---------------------------------------===//
//
// The float activations run on FastMath.h's vectorizable approximations;
// the same exp serves softmax, attention and cross-entropy
// (detail::expSubSum).
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "FastMath.h"
#include "mp/Runtime/Kernels.h"

#include "OpenMP.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mp::rt::cpu {
namespace {

using namespace fastmath;

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
