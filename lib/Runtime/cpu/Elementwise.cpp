//===- Elementwise.cpp - broadcasting elementwise CPU kernels -------------===//
//
// binary, compare, where, cast, expand, copy. Broadcasting goes through a
// "plan": the output shape with size-1 dims dropped and adjacent dims merged
// wherever every operand's strides allow it, so that same-shape, scalar and
// row (bias) broadcasts all become one contiguous inner loop.
//
//===----------------------------------------------------------------------===//
#include "Common.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Support/Float16.h"
#include "mp/Support/IntegerArithmetic.h"

#include "OpenMP.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace mp::rt::cpu {
namespace {

//===----------------------------------------------------------------------===//
// Broadcast plans
//===----------------------------------------------------------------------===//

struct Plan {
  std::vector<int64_t> shape;                // collapsed output shape
  std::vector<std::vector<int64_t>> strides; // per input, in elements
};

Plan makePlan(const std::vector<int64_t> &out,
              const std::vector<const std::vector<int64_t> *> &ins) {
  size_t r = out.size(), n = ins.size();
  std::vector<std::vector<int64_t>> full(n, std::vector<int64_t>(r, 0));
  for (size_t i = 0; i < n; ++i) {
    const std::vector<int64_t> &s = *ins[i];
    int64_t st = 1;
    for (size_t d = s.size(); d-- > 0;) {
      if (d + r >= s.size()) {
        size_t od = d + r - s.size();
        full[i][od] = (s[d] == 1 && out[od] != 1) ? 0 : st;
      }
      st *= s[d];
    }
  }
  Plan p;
  p.strides.resize(n);
  for (size_t d = 0; d < r; ++d) {
    if (out[d] == 1)
      continue;
    if (!p.shape.empty()) {
      bool merge = true;
      for (size_t i = 0; i < n; ++i)
        if (p.strides[i].back() != full[i][d] * out[d])
          merge = false;
      if (merge) {
        p.shape.back() *= out[d];
        for (size_t i = 0; i < n; ++i)
          p.strides[i].back() = full[i][d];
        continue;
      }
    }
    p.shape.push_back(out[d]);
    for (size_t i = 0; i < n; ++i)
      p.strides[i].push_back(full[i][d]);
  }
  if (p.shape.empty()) {
    p.shape.push_back(1);
    for (size_t i = 0; i < n; ++i)
      p.strides[i].push_back(0);
  }
  return p;
}

/// Runs inner(outOffset, inOffsets, length, innerStrides) over the plan's
/// rows (the innermost dim), split in pieces across threads when large.
template <size_t N, class F> void runPlan(const Plan &p, F &&inner) {
  const size_t r = p.shape.size();
  const int64_t len = p.shape[r - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < r; ++d)
    rows *= p.shape[d];
  const int64_t total = rows * len;
  if (total == 0)
    return;
  bool parallel = shouldParallelize(total);
  int64_t pieceLen = len;
  if (parallel && rows < 256 && len > 8192)
    pieceLen = 8192;
  const int64_t pieces = (len + pieceLen - 1) / pieceLen;
  int64_t innerStride[N];
  for (size_t i = 0; i < N; ++i)
    innerStride[i] = p.strides[i][r - 1];

  parallelRange(rows * pieces, parallel, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(r, 0);
    int64_t offs[N] = {};
    int64_t row = begin / pieces, piece = begin % pieces;
    for (size_t d = r - 1, rem = row; d-- > 0;) {
      idx[d] = rem % p.shape[d];
      rem /= p.shape[d];
      for (size_t i = 0; i < N; ++i)
        offs[i] += idx[d] * p.strides[i][d];
    }
    for (int64_t it = begin; it < end; ++it) {
      int64_t start = piece * pieceLen;
      int64_t n = std::min(pieceLen, len - start);
      int64_t o[N];
      for (size_t i = 0; i < N; ++i)
        o[i] = offs[i] + start * innerStride[i];
      inner(row * len + start, o, n, innerStride);
      if (++piece == pieces) {
        piece = 0;
        ++row;
        for (size_t d = r - 1; d-- > 0;) {
          ++idx[d];
          for (size_t i = 0; i < N; ++i)
            offs[i] += p.strides[i][d];
          if (idx[d] < p.shape[d])
            break;
          for (size_t i = 0; i < N; ++i)
            offs[i] -= p.strides[i][d] * p.shape[d];
          idx[d] = 0;
        }
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// Type dispatch
//===----------------------------------------------------------------------===//

/// f32, f64, i64, i32, i8.
template <class F> bool dispatchArith(DType t, F &&f) {
  switch (t) {
  case DType::F32: f(float{}); return true;
  case DType::F64: f(double{}); return true;
  case DType::I64: f(int64_t{}); return true;
  case DType::I32: f(int32_t{}); return true;
  case DType::I8: f(int8_t{}); return true;
  default: return false;
  }
}

//===----------------------------------------------------------------------===//
// cast
//===----------------------------------------------------------------------===//

struct Half {
  uint16_t bits;
};
struct BFloat {
  uint16_t bits;
};
struct Boolean {
  uint8_t v;
};

template <class T>
constexpr bool isHalfLike =
    std::is_same_v<T, Half> || std::is_same_v<T, BFloat>;

template <class T> inline float halfValue(T h) {
  if constexpr (std::is_same_v<T, Half>)
    return halfToFloat(h.bits);
  else
    return bf16ToFloat(h.bits);
}

template <class D, class S> inline D convert(S s) {
  if constexpr (std::is_same_v<S, Boolean>) {
    // 0 or 1.
    if constexpr (std::is_same_v<D, Half>)
      return D{uint16_t(s.v ? 0x3c00 : 0)};
    else if constexpr (std::is_same_v<D, BFloat>)
      return D{uint16_t(s.v ? 0x3f80 : 0)};
    else if constexpr (std::is_same_v<D, Boolean>)
      return D{uint8_t(s.v != 0)};
    else
      return D(s.v != 0);
  } else if constexpr (isHalfLike<S>) {
    float f = halfValue(s);
    if constexpr (std::is_same_v<D, Half>)
      return D{floatToHalf(f)};
    else if constexpr (std::is_same_v<D, BFloat>)
      return D{floatToBf16(f)};
    else
      return convert<D, float>(f);
  } else if constexpr (std::is_same_v<D, Boolean>) {
    return D{uint8_t(s != S(0))};
  } else if constexpr (std::is_same_v<D, Half>) {
    if constexpr (std::is_same_v<S, float>)
      return D{floatToHalf(s)};
    else
      return D{doubleToHalf(double(s))};
  } else if constexpr (std::is_same_v<D, BFloat>) {
    if constexpr (std::is_same_v<S, float>)
      return D{floatToBf16(s)};
    else // integers convert exactly to double below 2^53: one rounding
      return D{doubleToBf16(double(s))};
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return saturatingToInt<D>(double(s));
  } else {
    return static_cast<D>(s);
  }
}

template <class F> bool dispatchCastType(DType t, F &&f) {
  switch (t) {
  case DType::F32: f(float{}); return true;
  case DType::F64: f(double{}); return true;
  case DType::F16: f(Half{}); return true;
  case DType::BF16: f(BFloat{}); return true;
  case DType::I64: f(int64_t{}); return true;
  case DType::I32: f(int32_t{}); return true;
  case DType::I8: f(int8_t{}); return true;
  case DType::Bool: f(Boolean{}); return true;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Binary ops
//===----------------------------------------------------------------------===//

template <class T, class Op>
void binaryLoop(const Plan &p, const T *a, const T *b, T *o, Op op) {
  runPlan<2>(p,
             [&](int64_t oo, const int64_t *off, int64_t n, const int64_t *st) {
               const T *pa = a + off[0];
               const T *pb = b + off[1];
               T *po = o + oo;
               if (st[0] == 1 && st[1] == 1) {
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = op(pa[i], pb[i]);
               } else if (st[0] == 1) {
                 const T y = *pb;
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = op(pa[i], y);
               } else if (st[1] == 1) {
                 const T x = *pa;
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = op(x, pb[i]);
               } else {
                 const T v = op(*pa, *pb);
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = v;
               }
             });
}

template <class T>
void binaryTyped(BinaryKind kind, const Plan &p, const T *a, const T *b, T *o,
                 const Tensor &bt) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (kind) {
    case BinaryKind::Add:
      return binaryLoop(p, a, b, o, [](T x, T y) { return x + y; });
    case BinaryKind::Sub:
      return binaryLoop(p, a, b, o, [](T x, T y) { return x - y; });
    case BinaryKind::Mul:
      return binaryLoop(p, a, b, o, [](T x, T y) { return x * y; });
    case BinaryKind::Div:
      return binaryLoop(p, a, b, o, [](T x, T y) { return x / y; });
    case BinaryKind::Pow: {
      if (bt.numel() == 1) {
        T e = b[0];
        if (e == T(2))
          return binaryLoop(p, a, b, o, [](T x, T) { return x * x; });
        if (e == T(3))
          return binaryLoop(p, a, b, o, [](T x, T) { return x * x * x; });
        if (e == T(1))
          return binaryLoop(p, a, b, o, [](T x, T) { return x; });
      }
      return binaryLoop(p, a, b, o, [](T x, T y) { return std::pow(x, y); });
    }
    }
  } else {
    switch (kind) {
    case BinaryKind::Add: return binaryLoop(p, a, b, o, wrapAdd<T>);
    case BinaryKind::Sub: return binaryLoop(p, a, b, o, wrapSub<T>);
    case BinaryKind::Mul: return binaryLoop(p, a, b, o, wrapMul<T>);
    case BinaryKind::Div: return binaryLoop(p, a, b, o, intDiv<T>);
    case BinaryKind::Pow: return binaryLoop(p, a, b, o, intPow<T>);
    }
  }
}

template <class T, class Op>
void compareLoop(const Plan &p, const T *a, const T *b, uint8_t *o, Op op) {
  runPlan<2>(p,
             [&](int64_t oo, const int64_t *off, int64_t n, const int64_t *st) {
               const T *pa = a + off[0];
               const T *pb = b + off[1];
               uint8_t *po = o + oo;
               const int64_t sa = st[0], sb = st[1];
               if (sa == 1 && sb == 1) {
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = op(pa[i], pb[i]) ? 1 : 0;
               } else {
                 for (int64_t i = 0; i < n; ++i)
                   po[i] = op(pa[i * sa], pb[i * sb]) ? 1 : 0;
               }
             });
}

template <class T, class Load>
void compareTyped(CompareKind kind, const Plan &p, const T *a, const T *b,
                  uint8_t *o, Load load) {
  switch (kind) {
  case CompareKind::Eq:
    return compareLoop(p, a, b, o,
                       [&](T x, T y) { return load(x) == load(y); });
  case CompareKind::Ne:
    return compareLoop(p, a, b, o,
                       [&](T x, T y) { return load(x) != load(y); });
  case CompareKind::Lt:
    return compareLoop(p, a, b, o, [&](T x, T y) { return load(x) < load(y); });
  case CompareKind::Le:
    return compareLoop(p, a, b, o,
                       [&](T x, T y) { return load(x) <= load(y); });
  case CompareKind::Gt:
    return compareLoop(p, a, b, o, [&](T x, T y) { return load(x) > load(y); });
  case CompareKind::Ge:
    return compareLoop(p, a, b, o,
                       [&](T x, T y) { return load(x) >= load(y); });
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Public kernels
//===----------------------------------------------------------------------===//

Status binary(BinaryKind kind, const Tensor &a, const Tensor &b, Tensor &out) {
  if (a.dtype != b.dtype)
    return mismatch("binary", a.dtype, b.dtype);
  if (out.dtype != a.dtype)
    return mismatch("binary", a.dtype, out.dtype);
  Plan p = makePlan(out.shape, {&a.shape, &b.shape});
  bool ok = dispatchArith(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    binaryTyped<T>(kind, p, a.as<const T>(), b.as<const T>(), out.as<T>(), b);
  });
  return ok ? Status::success() : typeError("binary", a.dtype);
}

Status compare(CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out) {
  if (a.dtype != b.dtype)
    return mismatch("compare", a.dtype, b.dtype);
  if (out.dtype != DType::Bool)
    return typeError("compare (result)", out.dtype);
  Plan p = makePlan(out.shape, {&a.shape, &b.shape});
  uint8_t *o = out.as<uint8_t>();
  auto same = [](auto v) { return v; };
  switch (a.dtype) {
  case DType::F32:
    compareTyped(kind, p, a.as<const float>(), b.as<const float>(), o, same);
    break;
  case DType::F64:
    compareTyped(kind, p, a.as<const double>(), b.as<const double>(), o, same);
    break;
  case DType::I64:
    compareTyped(kind, p, a.as<const int64_t>(), b.as<const int64_t>(), o,
                 same);
    break;
  case DType::I32:
    compareTyped(kind, p, a.as<const int32_t>(), b.as<const int32_t>(), o,
                 same);
    break;
  case DType::I8:
    compareTyped(kind, p, a.as<const int8_t>(), b.as<const int8_t>(), o, same);
    break;
  case DType::Bool:
    compareTyped(kind, p, a.as<const uint8_t>(), b.as<const uint8_t>(), o,
                 [](uint8_t v) { return v != 0; });
    break;
  case DType::F16:
    compareTyped(kind, p, a.as<const uint16_t>(), b.as<const uint16_t>(), o,
                 [](uint16_t v) { return halfToFloat(v); });
    break;
  case DType::BF16:
    compareTyped(kind, p, a.as<const uint16_t>(), b.as<const uint16_t>(), o,
                 [](uint16_t v) { return bf16ToFloat(v); });
    break;
  }
  return Status::success();
}

Status where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Tensor &out) {
  if (cond.dtype != DType::Bool)
    return typeError("where (condition)", cond.dtype);
  if (a.dtype != b.dtype)
    return mismatch("where", a.dtype, b.dtype);
  if (out.dtype != a.dtype)
    return mismatch("where", a.dtype, out.dtype);
  Plan p = makePlan(out.shape, {&cond.shape, &a.shape, &b.shape});
  const uint8_t *c = cond.as<const uint8_t>();
  dispatchBytes(dtypeSize(a.dtype), [&](auto tag) {
    using T = decltype(tag);
    const T *pa = a.as<const T>();
    const T *pb = b.as<const T>();
    T *po = out.as<T>();
    runPlan<3>(
        p, [&](int64_t oo, const int64_t *off, int64_t n, const int64_t *st) {
          const uint8_t *cc = c + off[0];
          const T *xa = pa + off[1];
          const T *xb = pb + off[2];
          T *xo = po + oo;
          const int64_t sc = st[0], sa = st[1], sb = st[2];
          if (sc == 1 && sa == 1 && sb == 1) {
            for (int64_t i = 0; i < n; ++i)
              xo[i] = cc[i] ? xa[i] : xb[i];
          } else {
            for (int64_t i = 0; i < n; ++i)
              xo[i] = cc[i * sc] ? xa[i * sa] : xb[i * sb];
          }
        });
  });
  return Status::success();
}

Status cast(const Tensor &x, Tensor &out) {
  const int64_t n = x.numel();
  if (x.dtype == out.dtype)
    return copy(x, out);
  bool parallel = shouldParallelize(n);
  bool ok = dispatchCastType(x.dtype, [&](auto stag) {
    using S = decltype(stag);
    dispatchCastType(out.dtype, [&](auto dtag) {
      using D = decltype(dtag);
      const S *src = static_cast<const S *>(x.data);
      D *dst = static_cast<D *>(out.data);
      parallelRange(n, parallel, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          dst[i] = convert<D, S>(src[i]);
      });
    });
  });
  return ok ? Status::success() : typeError("cast", x.dtype);
}

Status expand(const Tensor &x, Tensor &out) {
  if (x.dtype != out.dtype)
    return mismatch("expand", x.dtype, out.dtype);
  Plan p = makePlan(out.shape, {&x.shape});
  dispatchBytes(dtypeSize(x.dtype), [&](auto tag) {
    using T = decltype(tag);
    const T *src = x.as<const T>();
    T *dst = out.as<T>();
    runPlan<1>(
        p, [&](int64_t oo, const int64_t *off, int64_t n, const int64_t *st) {
          const T *s = src + off[0];
          T *d = dst + oo;
          if (st[0] == 1) {
            std::memcpy(d, s, size_t(n) * sizeof(T));
          } else {
            const T v = *s;
            for (int64_t i = 0; i < n; ++i)
              d[i] = v;
          }
        });
  });
  return Status::success();
}

Status copy(const Tensor &x, Tensor &out) {
  size_t bytes = std::min(x.bytes(), out.bytes());
  if (x.data == out.data || bytes == 0)
    return Status::success();
  const char *src = static_cast<const char *>(x.data);
  char *dst = static_cast<char *>(out.data);
  constexpr size_t kChunk = size_t(1) << 20;
  int64_t chunks = int64_t((bytes + kChunk - 1) / kChunk);
  parallelRange(chunks, shouldParallelize(int64_t(bytes / 16)) && chunks > 1,
                [&](int64_t b, int64_t e) {
                  size_t from = size_t(b) * kChunk;
                  size_t to = std::min(bytes, size_t(e) * kChunk);
                  std::memmove(dst + from, src + from, to - from);
                });
  return Status::success();
}

} // namespace mp::rt::cpu
