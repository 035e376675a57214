//===- Common.cuh - what the CUDA kernel files share ---------------*- CUDA
//-*-===//
//
// Element types and the type dispatch of the kernels, launch helpers, block
// reductions, and the cuBLAS handle and kernel scratch (defined once, in
// Linalg.cu and Device.cu). First versions of the kernels, written for
// correctness against the CPU kernels: one thread per output element with
// broadcast strides for elementwise ops, one block per row for norms and
// softmax, cuBLAS for GEMMs, and attention as two strided-batched cuBLAS
// GEMMs around a masked-softmax kernel (the plans are in Plans.h, tested on
// the CPU). A fused (flash) attention kernel comes with GPU benchmarking.
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDA_COMMON_CUH
#define MP_RUNTIME_CUDA_COMMON_CUH

#include "mp/Runtime/CudaKernels.h"
#include "mp/Support/IntegerArithmetic.h"

#include "Plans.h"
#include "Streams.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <initializer_list>
#include <type_traits>

namespace mp::rt::cuda {

constexpr int kThreads = 256;

inline Status launched(const char *kernel) {
  return cudaStatus(cudaGetLastError(), kernel);
}

inline Status typeError(const char *kernel, DType t) {
  return Status::error(std::string(kernel) + ": unsupported element type " +
                       dtypeName(t) + " on CUDA");
}

/// Every tensor given has the first's element type, as the CPU kernels
/// check: a kernel indexes them all as one type.
inline Status sameTypes(const char *kernel,
                        std::initializer_list<const Tensor *> tensors) {
  const DType t = (*tensors.begin())->dtype;
  for (const Tensor *x : tensors)
    if (x && x->dtype != t)
      return Status::error(std::string(kernel) + ": element types differ (" +
                           dtypeName(t) + " and " + dtypeName(x->dtype) + ")");
  return Status::success();
}

inline bool isFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

inline int blocksFor(int64_t n) {
  return static_cast<int>(
      std::min<int64_t>((n + kThreads - 1) / kThreads, 65535LL * 16));
}

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// The device type of each DType: Bool is uint8_t (0 or 1), I8 is int8_t.
/// A kernel computes in Compute<T>: fp32 for fp32, fp16 and bf16 (fp16 and
/// bf16 are storage formats), fp64 for fp64, the integer itself for
/// integers and bool for Bool.
template <typename T> struct ComputeOf { using type = T; };
template <> struct ComputeOf<__half> { using type = float; };
template <> struct ComputeOf<__nv_bfloat16> { using type = float; };
template <> struct ComputeOf<uint8_t> { using type = bool; };
template <typename T> using Compute = typename ComputeOf<T>::type;

template <typename T> __device__ __forceinline__ Compute<T> toC(T v) {
  return v;
}
template <> __device__ __forceinline__ float toC(__half v) {
  return __half2float(v);
}
template <> __device__ __forceinline__ float toC(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ bool toC(uint8_t v) { return v != 0; }

template <typename T> __device__ __forceinline__ T fromC(Compute<T> v) {
  return v;
}
template <> __device__ __forceinline__ __half fromC<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromC<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

/// fp32 and fp64 overloads of the math functions the kernels call.
#define MP_MATH_OVERLOADS(name)                                                \
  __device__ __forceinline__ float m_##name(float v) { return name##f(v); }    \
  __device__ __forceinline__ double m_##name(double v) { return name(v); }
MP_MATH_OVERLOADS(exp)
MP_MATH_OVERLOADS(log)
MP_MATH_OVERLOADS(sqrt)
MP_MATH_OVERLOADS(tanh)
MP_MATH_OVERLOADS(erfc)
MP_MATH_OVERLOADS(erf)
MP_MATH_OVERLOADS(cos)
MP_MATH_OVERLOADS(sin)
#undef MP_MATH_OVERLOADS
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) {
  return pow(x, y);
}

/// Runs the statements with `T` bound to the device type of `dtype`, or
/// returns an unsupported-type error for `kernel`: MP_FLOAT_TYPES for the
/// fp32-computing types, MP_REAL_TYPES adds fp64, MP_INTEGER_TYPES, and
/// MP_ALL_TYPES for every DType.
#define MP_CASE(dt, type, ...)                                                 \
  case DType::dt: {                                                            \
    using T = type;                                                            \
    __VA_ARGS__;                                                               \
    break;                                                                     \
  }
#define MP_FLOAT_CASES(...)                                                    \
  MP_CASE(F32, float, __VA_ARGS__)                                             \
  MP_CASE(F16, __half, __VA_ARGS__)                                            \
  MP_CASE(BF16, __nv_bfloat16, __VA_ARGS__)
#define MP_INTEGER_CASES(...)                                                  \
  MP_CASE(I64, int64_t, __VA_ARGS__)                                           \
  MP_CASE(I32, int32_t, __VA_ARGS__)                                           \
  MP_CASE(I8, int8_t, __VA_ARGS__)
#define MP_SWITCH_TYPES(dtype, kernel, ...)                                    \
  switch (dtype) {                                                             \
    __VA_ARGS__                                                                \
  default: return typeError(kernel, dtype);                                    \
  }
#define MP_FLOAT_TYPES(dtype, kernel, ...)                                     \
  MP_SWITCH_TYPES(dtype, kernel, MP_FLOAT_CASES(__VA_ARGS__))
#define MP_REAL_TYPES(dtype, kernel, ...)                                      \
  MP_SWITCH_TYPES(dtype, kernel,                                               \
                  MP_FLOAT_CASES(__VA_ARGS__)                                  \
                      MP_CASE(F64, double, __VA_ARGS__))
#define MP_INTEGER_TYPES(dtype, kernel, ...)                                   \
  MP_SWITCH_TYPES(dtype, kernel, MP_INTEGER_CASES(__VA_ARGS__))
#define MP_ALL_TYPES(dtype, kernel, ...)                                       \
  MP_SWITCH_TYPES(                                                             \
      dtype, kernel,                                                           \
      MP_FLOAT_CASES(__VA_ARGS__) MP_CASE(F64, double, __VA_ARGS__)            \
          MP_INTEGER_CASES(__VA_ARGS__) MP_CASE(Bool, uint8_t, __VA_ARGS__))

//===----------------------------------------------------------------------===//
// Block reductions (one block of kThreads threads)
//===----------------------------------------------------------------------===//

/// Reduces `v` over the block with `combine` (identity `init`); every thread
/// gets the result. `shared` holds one V per warp.
template <typename V, typename Combine>
__device__ V blockReduce(V v, V *shared, V init, Combine combine) {
  for (int o = 16; o > 0; o /= 2)
    v = combine(v, __shfl_down_sync(0xffffffff, v, o));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  v = threadIdx.x < blockDim.x / 32 ? shared[lane] : init;
  if (warp == 0)
    for (int o = 16; o > 0; o /= 2)
      v = combine(v, __shfl_down_sync(0xffffffff, v, o));
  if (threadIdx.x == 0)
    shared[0] = v;
  __syncthreads();
  V total = shared[0];
  __syncthreads();
  return total;
}

template <typename V> __device__ V blockSum(V v, V *shared) {
  return blockReduce(v, shared, V(0), [](V a, V b) { return a + b; });
}

template <typename V> __device__ V blockMax(V v, V *shared) {
  return blockReduce(v, shared, V(-INFINITY),
                     [](V a, V b) { return a > b ? a : b; });
}

/// The block's max of a row and the sum of exp(x - max): a stable softmax
/// denominator, in Compute<T>.
template <typename T>
__device__ Compute<T> rowMaxExpSum(const T *row, int64_t n, Compute<T> *shared,
                                   Compute<T> &sum) {
  using C = Compute<T>;
  C m = -INFINITY;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    m = toC(row[i]) > m ? toC(row[i]) : m;
  m = blockMax(m, shared);
  C s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += m_exp(toC(row[i]) - m);
  sum = blockSum(s, shared);
  return m;
}

inline Strides contiguous(const std::vector<int64_t> &shape) {
  Strides st;
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    st.s[i] = stride;
    stride *= shape[i];
  }
  return st;
}

/// Runs a row-major GEMM plan (Plans.h): A and B of `abType`, C of
/// `cType`, C = alpha · op(A) · op(B) (+ C when the plan accumulates), in
/// fp32 (fp64 for fp64 operands, which need an fp64 C). Linalg.cu.
Status gemm(const RowMajorGemm &g, DType abType, const void *a, const void *b,
            DType cType, void *c, float alpha = 1.0f);

/// The process's cuBLAS handle, on the compute stream (Linalg.cu), created
/// on first use; the error says why cuBLAS could not be set up.
Status blasHandle(cublasHandle_t &handle);

/// Scratch of the kernels on the compute stream: attention scores (chunks
/// keep them within kAttentionScratchBudget) and the cross-entropy
/// accumulator. Stream order keeps one kernel's use apart from the next's.
/// The executable lends the block it sized for its program at load
/// (lendScratch, Device.cu) while it runs.
DeviceScratch &kernelScratch();

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDA_COMMON_CUH
