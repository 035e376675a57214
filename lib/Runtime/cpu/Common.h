//===- Common.h - helpers shared by the CPU kernels ---------------*- C++
//-*-===//
#ifndef MP_LIB_RUNTIME_CPU_COMMON_H
#define MP_LIB_RUNTIME_CPU_COMMON_H

#include "mp/Runtime/Tensor.h"

#include "OpenMP.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace mp::rt::cpu {

/// Below this much work, threads cost more than they save.
constexpr int64_t kParallelMin = 32768;

inline bool shouldParallelize(int64_t work) {
  return work >= kParallelMin && !omp_in_parallel() &&
         omp_get_max_threads() > 1;
}

/// The product of dims [from, to) of `s` (the whole shape by default).
inline int64_t product(const std::vector<int64_t> &s, size_t from = 0,
                       size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i)
    p *= s[i];
  return p;
}

/// Element strides of an attention mask broadcast to [B, H, Sq, Sk]: 0 along
/// the dims it broadcasts (all zeros without a mask).
inline void maskStrides(const Tensor *mask, int64_t strides[4]) {
  std::fill(strides, strides + 4, 0);
  if (!mask)
    return;
  const size_t rank = mask->shape.size();
  int64_t step = 1;
  for (size_t d = rank; d-- > 0;) {
    strides[d + 4 - rank] = mask->shape[d] == 1 ? 0 : step;
    step *= mask->shape[d];
  }
}

/// Calls f(begin, end) on contiguous parts of [0, n), one per thread.
template <class F> void parallelRange(int64_t n, bool parallel, F &&f) {
  if (!parallel || n <= 1) {
    if (n > 0)
      f(int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = n / nt, rem = n % nt;
    int64_t b = t * chunk + std::min(t, rem);
    int64_t e = b + chunk + (t < rem ? 1 : 0);
    if (b < e)
      f(b, e);
  }
}

/// Calls f with an unsigned type of the element size (moving bytes).
template <class F> void dispatchBytes(size_t size, F &&f) {
  switch (size) {
  case 1: f(uint8_t{}); break;
  case 2: f(uint16_t{}); break;
  case 4: f(uint32_t{}); break;
  default: f(uint64_t{}); break;
  }
}

/// The bits of `from` read as a `To` of the same size.
template <class To, class From> inline To bitCast(From from) {
  static_assert(sizeof(To) == sizeof(From), "sizes differ");
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

inline Status typeError(const char *kernel, DType t) {
  return Status::error(std::string(kernel) + ": unsupported element type " +
                       dtypeName(t));
}

/// An error naming the first operand or result that is not f32 (null
/// entries are absent operands).
inline Status expectF32(const char *kernel,
                        std::initializer_list<const Tensor *> tensors) {
  for (const Tensor *t : tensors)
    if (t && t->dtype != DType::F32)
      return typeError(kernel, t->dtype);
  return Status::success();
}

inline Status mismatch(const char *kernel, DType a, DType b) {
  return Status::error(std::string(kernel) + ": element types differ (" +
                       dtypeName(a) + " and " + dtypeName(b) + ")");
}

/// Vectorized float math (Math.cpp), shared by softmax, norms and attention.
namespace detail {
float expSubSum(const float *x, float shift, float *y, int64_t n);
float expSubSumNoStore(const float *x, float shift, int64_t n);
void expInPlace(float *y, int64_t n);
float maxOf(const float *x, int64_t n);
} // namespace detail

} // namespace mp::rt::cpu

#endif // MP_LIB_RUNTIME_CPU_COMMON_H
