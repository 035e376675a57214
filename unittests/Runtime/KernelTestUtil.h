//===- KernelTestUtil.h - helpers of the CPU kernel tests ---------*- C++
//-*-===//
//
// Buffers of any element type, index arithmetic and closeness checks shared
// by the kernel tests. Each test checks a kernel against a plain nested-loop
// reference written in its file in double precision (independent of the
// kernel code), on random inputs from fixed seeds. f32 results must match
// within 1e-5 relative (plus a small absolute term where the reference sums
// many products).
//
//===----------------------------------------------------------------------===//
#ifndef MP_UNITTESTS_RUNTIME_KERNELTESTUTIL_H
#define MP_UNITTESTS_RUNTIME_KERNELTESTUTIL_H

#include "mp/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

namespace mp::rt::test {
using namespace mp::rt;
using namespace mp::rt::cpu;

using Shape = std::vector<int64_t>;

inline int64_t numelOf(const Shape &s) {
  int64_t n = 1;
  for (int64_t d : s)
    n *= d;
  return n;
}

inline std::vector<int64_t> unravel(int64_t i, const Shape &s) {
  std::vector<int64_t> idx(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    idx[d] = i % s[d];
    i /= s[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t> &idx, const Shape &s) {
  int64_t i = 0;
  for (size_t d = 0; d < s.size(); ++d)
    i = i * s[d] + idx[d];
  return i;
}

/// Linear index into `in` of output element `o` under numpy broadcasting.
inline int64_t broadcastIndex(const Shape &in, const Shape &out, int64_t o) {
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
  template <class T> const T *p() const {
    return static_cast<const T *>(t.data);
  }
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

inline Buf randomBuf(DType dtype, Shape shape, uint32_t seed, double lo = -1.0,
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

inline Buf fromValues(DType dtype, Shape shape, const std::vector<double> &v) {
  Buf b(dtype, std::move(shape));
  EXPECT_EQ(int64_t(v.size()), b.n());
  for (int64_t i = 0; i < b.n() && i < int64_t(v.size()); ++i)
    b.set(i, v[size_t(i)]);
  return b;
}

/// got[i] ~ ref[i] within rtol * |ref| + atol; reports the first mismatches.
inline void expectClose(const Buf &got, const std::vector<double> &ref,
                        double rtol, double atol,
                        const std::string &what = "") {
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

inline void expectExact(const Buf &got, const std::vector<double> &ref,
                        const std::string &what = "") {
  expectClose(got, ref, 0, 0, what);
}

constexpr double kRtol = 1e-5;

} // namespace mp::rt::test

#endif // MP_UNITTESTS_RUNTIME_KERNELTESTUTIL_H
