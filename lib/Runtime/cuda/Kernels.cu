//===- Kernels.cu - CUDA kernels ------------------------------------------===//
//
// First versions, written for correctness against the CPU kernels: one
// thread per output element with broadcast strides for elementwise ops, one
// block per row for norms and softmax, cuBLAS for GEMMs, and attention as two
// strided-batched cuBLAS GEMMs around a masked-softmax kernel, in chunks of
// bounded scratch (the plans are in Plans.h, tested on the CPU). A fused
// (flash) attention kernel comes with GPU benchmarking.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/CudaKernels.h"
#include "mp/Runtime/IntegerArithmetic.h"

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

namespace {

constexpr int kThreads = 256;

Status launched(const char *kernel) {
  return cudaStatus(cudaGetLastError(), kernel);
}

Status typeError(const char *kernel, DType t) {
  return Status::error(std::string(kernel) + ": unsupported element type " +
                       dtypeName(t) + " on CUDA");
}

/// Every tensor given has the first's element type, as the CPU kernels
/// check: a kernel indexes them all as one type.
Status sameTypes(const char *kernel,
                 std::initializer_list<const Tensor *> tensors) {
  const DType t = (*tensors.begin())->dtype;
  for (const Tensor *x : tensors)
    if (x && x->dtype != t)
      return Status::error(std::string(kernel) + ": element types differ (" +
                           dtypeName(t) + " and " + dtypeName(x->dtype) + ")");
  return Status::success();
}

bool isFloatType(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

int blocksFor(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads,
                                            65535LL * 16));
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
template <> __device__ __forceinline__ __nv_bfloat16 fromC<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

/// fp32 and fp64 overloads of the math functions the kernels call.
#define MP_MATH_OVERLOADS(name)                                               \
  __device__ __forceinline__ float m_##name(float v) { return name##f(v); }   \
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
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

/// Runs the statements with `T` bound to the device type of `dtype`, or
/// returns an unsupported-type error for `kernel`: MP_FLOAT_TYPES for the
/// fp32-computing types, MP_REAL_TYPES adds fp64, MP_INTEGER_TYPES, and
/// MP_ALL_TYPES for every DType.
#define MP_CASE(dt, type, ...)                                                \
  case DType::dt: { using T = type; __VA_ARGS__; break; }
#define MP_FLOAT_CASES(...)                                                   \
  MP_CASE(F32, float, __VA_ARGS__)                                            \
  MP_CASE(F16, __half, __VA_ARGS__)                                           \
  MP_CASE(BF16, __nv_bfloat16, __VA_ARGS__)
#define MP_INTEGER_CASES(...)                                                 \
  MP_CASE(I64, int64_t, __VA_ARGS__)                                          \
  MP_CASE(I32, int32_t, __VA_ARGS__)                                          \
  MP_CASE(I8, int8_t, __VA_ARGS__)
#define MP_SWITCH_TYPES(dtype, kernel, ...)                                   \
  switch (dtype) {                                                            \
    __VA_ARGS__                                                               \
  default: return typeError(kernel, dtype);                                   \
  }
#define MP_FLOAT_TYPES(dtype, kernel, ...)                                    \
  MP_SWITCH_TYPES(dtype, kernel, MP_FLOAT_CASES(__VA_ARGS__))
#define MP_REAL_TYPES(dtype, kernel, ...)                                     \
  MP_SWITCH_TYPES(dtype, kernel, MP_FLOAT_CASES(__VA_ARGS__)                  \
                                     MP_CASE(F64, double, __VA_ARGS__))
#define MP_INTEGER_TYPES(dtype, kernel, ...)                                  \
  MP_SWITCH_TYPES(dtype, kernel, MP_INTEGER_CASES(__VA_ARGS__))
#define MP_ALL_TYPES(dtype, kernel, ...)                                      \
  MP_SWITCH_TYPES(dtype, kernel, MP_FLOAT_CASES(__VA_ARGS__)                  \
                  MP_CASE(F64, double, __VA_ARGS__)                           \
                  MP_INTEGER_CASES(__VA_ARGS__)                               \
                  MP_CASE(Bool, uint8_t, __VA_ARGS__))

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void binaryKernel(int kind, const T *a, const T *b, T *o, int64_t n,
                             Dims dims, Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Compute<T> x = toC(a[offsetOf(i, dims, sa)]),
               y = toC(b[offsetOf(i, dims, sb)]), r = 0;
    switch (kind) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = m_pow(x, y); break;
    }
    o[i] = fromC<T>(r);
  }
}

/// Integer binary ops with the CPU kernels' semantics (IntegerArithmetic.h).
template <typename T>
__global__ void integerBinaryKernel(int kind, const T *a, const T *b, T *o,
                                    int64_t n, Dims dims, Strides sa,
                                    Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    T x = a[offsetOf(i, dims, sa)], y = b[offsetOf(i, dims, sb)], r = 0;
    switch (kind) {
    case 0: r = wrapAdd(x, y); break;
    case 1: r = wrapSub(x, y); break;
    case 2: r = wrapMul(x, y); break;
    case 3: r = intDiv(x, y); break;
    case 4: r = intPow(x, y); break;
    }
    o[i] = r;
  }
}

/// Compares in Compute<T>: exactly for 64-bit integers, bools as 0 or 1.
template <typename T>
__global__ void compareKernel(int kind, const T *a, const T *b, uint8_t *o,
                              int64_t n, Dims dims, Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    Compute<T> x = toC(a[offsetOf(i, dims, sa)]),
               y = toC(b[offsetOf(i, dims, sb)]);
    bool r = false;
    switch (kind) {
    case 0: r = x == y; break;
    case 1: r = x != y; break;
    case 2: r = x < y; break;
    case 3: r = x <= y; break;
    case 4: r = x > y; break;
    case 5: r = x >= y; break;
    }
    o[i] = r;
  }
}

template <typename T>
__global__ void whereKernel(const uint8_t *c, const T *a, const T *b, T *o,
                            int64_t n, Dims dims, Strides sc, Strides sa,
                            Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = c[offsetOf(i, dims, sc)] ? a[offsetOf(i, dims, sa)]
                                    : b[offsetOf(i, dims, sb)];
}

/// Float unary ops in Compute<T>, with the CPU kernels' formulas.
template <typename T>
__global__ void unaryKernel(int kind, const T *x, T *o, int64_t n) {
  using C = Compute<T>;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const C v = toC(x[i]), one = 1;
    C r = 0;
    switch (static_cast<cpu::UnaryKind>(kind)) {
    case cpu::UnaryKind::Neg: r = -v; break;
    case cpu::UnaryKind::Exp: r = m_exp(v); break;
    case cpu::UnaryKind::Log: r = m_log(v); break;
    case cpu::UnaryKind::Sqrt: r = m_sqrt(v); break;
    case cpu::UnaryKind::Rsqrt: r = one / m_sqrt(v); break;
    case cpu::UnaryKind::Reciprocal: r = one / v; break;
    case cpu::UnaryKind::Tanh: r = m_tanh(v); break;
    case cpu::UnaryKind::Erf: r = m_erf(v); break;
    case cpu::UnaryKind::Sigmoid: r = one / (one + m_exp(-v)); break;
    case cpu::UnaryKind::Relu: r = v < 0 ? C(0) : v; break; // NaN stays NaN
    case cpu::UnaryKind::Silu: r = v / (one + m_exp(-v)); break;
    case cpu::UnaryKind::Gelu:
      r = C(0.5) * v * m_erfc(v * C(-0.70710678118654752440));
      break;
    case cpu::UnaryKind::GeluTanh: {
      // x * sigmoid(2u) = 0.5 x (1 + tanh(u)), without cancellation.
      C u = C(0.79788456080286535588) * (v + C(0.044715) * v * v * v);
      r = v / (one + m_exp(C(-2) * u));
      break;
    }
    case cpu::UnaryKind::Cos: r = m_cos(v); break;
    case cpu::UnaryKind::Sin: r = m_sin(v); break;
    }
    o[i] = fromC<T>(r);
  }
}

/// The integer unary ops the CPU has: negation (wrapping) and relu.
template <typename T>
__global__ void integerUnaryKernel(bool relu, const T *x, T *o, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = relu ? (x[i] < 0 ? T(0) : x[i]) : wrapSub(T(0), x[i]);
}

/// One element converted as the CPU's cast does: through fp32 from fp16
/// and bf16, one rounding from integers and fp64, floats to integers
/// saturating (IntegerArithmetic.h), integers narrowed with wrap-around,
/// anything to Bool as != 0.
template <typename D, typename S> __device__ D convertElement(S s) {
  const Compute<S> v = toC(s);
  if constexpr (std::is_same_v<D, uint8_t>)
    return v != 0;
  else if constexpr (std::is_same_v<D, __half>)
    return std::is_same_v<Compute<S>, float> ? __float2half(float(v))
                                             : __double2half(double(v));
  else if constexpr (std::is_same_v<D, __nv_bfloat16>)
    return std::is_same_v<Compute<S>, float> ? __float2bfloat16(float(v))
                                             : __double2bfloat16(double(v));
  else if constexpr (std::is_integral_v<D> &&
                     std::is_floating_point_v<Compute<S>>)
    return saturatingToInt<D>(double(v));
  else
    return static_cast<D>(v);
}

template <typename D, typename S>
__global__ void castKernel(const S *x, D *o, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = convertElement<D>(x[i]);
}

/// Copies elements of `elemBytes` to out[i] from in[offsetOf(i)].
/// out[outBase + offsetOf(i, dims, outSt)] = in[inBase + offsetOf(i, dims,
/// inSt)] for every index i of `dims`.
template <typename E>
__global__ void moveElements(const E *in, E *out, int64_t n, Dims dims,
                             Strides inSt, int64_t inBase, Strides outSt,
                             int64_t outBase) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[outBase + offsetOf(i, dims, outSt)] =
        in[inBase + offsetOf(i, dims, inSt)];
}

Strides contiguous(const std::vector<int64_t> &shape) {
  Strides st;
  int64_t stride = 1;
  for (int i = static_cast<int>(shape.size()) - 1; i >= 0; --i) {
    st.s[i] = stride;
    stride *= shape[i];
  }
  return st;
}

/// Moves the elements of an index space `shape` between two strided views.
Status moveBytes(const Tensor &in, void *out, const std::vector<int64_t> &shape,
                 Strides inSt, int64_t inBase, Strides outSt, int64_t outBase,
                 const char *kernel) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(shape);
  coalesce(dims, {&inSt, &outSt});
  int grid = blocksFor(n);
  switch (dtypeSize(in.dtype)) {
  case 1: moveElements<<<grid, kThreads, 0, computeStream()>>>(in.as<uint8_t>(), static_cast<uint8_t *>(out), n, dims, inSt, inBase, outSt, outBase); break;
  case 2: moveElements<<<grid, kThreads, 0, computeStream()>>>(in.as<uint16_t>(), static_cast<uint16_t *>(out), n, dims, inSt, inBase, outSt, outBase); break;
  case 4: moveElements<<<grid, kThreads, 0, computeStream()>>>(in.as<uint32_t>(), static_cast<uint32_t *>(out), n, dims, inSt, inBase, outSt, outBase); break;
  case 8: moveElements<<<grid, kThreads, 0, computeStream()>>>(in.as<uint64_t>(), static_cast<uint64_t *>(out), n, dims, inSt, inBase, outSt, outBase); break;
  default: return typeError(kernel, in.dtype);
  }
  return launched(kernel);
}

Status gatherBytes(const Tensor &x, Tensor &out, const Strides &st,
                   const char *kernel) {
  return moveBytes(x, out.data, out.shape, st, 0, contiguous(out.shape), 0,
                   kernel);
}

//===----------------------------------------------------------------------===//
// Rows: norms and softmax (one block per row, kThreads threads)
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

template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias,
                                T *o, int64_t inner, float eps, bool rms) {
  __shared__ float shared[32];
  const T *row = x + blockIdx.x * inner;
  T *out = o + blockIdx.x * inner;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
    sum += rms ? toC(row[i]) * toC(row[i]) : toC(row[i]);
  float mean = rms ? 0.0f : blockSum(sum, shared) / inner;
  float var;
  if (rms) {
    var = blockSum(sum, shared) / inner;
  } else {
    float sq = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      sq += (toC(row[i]) - mean) * (toC(row[i]) - mean);
    var = blockSum(sq, shared) / inner;
  }
  float inv = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
    out[i] = fromC<T>((toC(row[i]) - mean) * inv * toC(scale[i]) +
                      (bias ? toC(bias[i]) : 0.0f));
}

/// The block's max of a row and the sum of exp(x - max): a stable softmax
/// denominator, in Compute<T>.
template <typename T>
__device__ Compute<T> rowMaxExpSum(const T *row, int64_t n,
                                   Compute<T> *shared, Compute<T> &sum) {
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

template <typename T>
__global__ void softmaxLastKernel(const T *x, T *o, int64_t dim) {
  using C = Compute<T>;
  __shared__ C shared[32];
  const T *row = x + blockIdx.x * dim;
  T *out = o + blockIdx.x * dim;
  C sum;
  C m = rowMaxExpSum(row, dim, shared, sum);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[i] = fromC<T>(m == C(-INFINITY) ? C(0) : m_exp(toC(row[i]) - m) / sum);
}

template <typename T>
__global__ void softmaxStridedKernel(const T *x, T *o, int64_t outer,
                                     int64_t dim, int64_t inner) {
  using C = Compute<T>;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       t < outer * inner; t += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (t / inner) * dim * inner + t % inner;
    C m = -INFINITY, sum = 0;
    for (int64_t a = 0; a < dim; ++a)
      m = toC(x[base + a * inner]) > m ? toC(x[base + a * inner]) : m;
    for (int64_t a = 0; a < dim; ++a)
      sum += m_exp(toC(x[base + a * inner]) - m);
    for (int64_t a = 0; a < dim; ++a) // a fully masked row gives zeros
      o[base + a * inner] =
          fromC<T>(m == C(-INFINITY) ? C(0)
                                     : m_exp(toC(x[base + a * inner]) - m) / sum);
  }
}

/// One block per score row of an attention chunk: hides the keys causality
/// hides, adds the mask, and writes the softmax as probabilities (in place
/// when T is float). Chunk row r is global row rowBase + r of [B*H*Sq, Sk].
template <typename T>
__global__ void attentionSoftmaxKernel(const float *scores, T *probs,
                                       int64_t keys, int64_t queries,
                                       int64_t rowBase, bool causal,
                                       const T *mask, Dims maskDims,
                                       Strides maskStrides) {
  __shared__ float shared[32];
  const int64_t row = rowBase + blockIdx.x, i = row % queries;
  const float *in = scores + blockIdx.x * keys;
  T *out = probs + blockIdx.x * keys;
  auto logit = [&](int64_t j) {
    if (!keyVisible(i, j, queries, keys, causal))
      return -INFINITY;
    float s = in[j];
    if (mask)
      s += toC(mask[offsetOf(row * keys + j, maskDims, maskStrides)]);
    return s;
  };
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    m = fmaxf(m, logit(j));
  m = blockMax(m, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    sum += expf(logit(j) - m);
  sum = blockSum(sum, shared);
  // A row that sees no key gives zeros, as on the CPU.
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    out[j] = fromC<T>(sum > 0 ? expf(logit(j) - m) / sum : 0.0f);
}

__global__ void gatherRowsKernel(const uint8_t *x, const void *idx, bool idx64,
                                 uint8_t *out, int64_t outer, int64_t count,
                                 int64_t dim, int64_t rowBytes) {
  int64_t total = outer * count * rowBytes;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t byte = t % rowBytes, k = (t / rowBytes) % count,
            o = t / rowBytes / count;
    int64_t j = idx64 ? static_cast<const int64_t *>(idx)[k]
                      : static_cast<const int32_t *>(idx)[k];
    if (j < 0)
      j += dim;
    out[t] = x[(o * dim + j) * rowBytes + byte];
  }
}

template <typename T>
__global__ void addBiasKernel(T *o, const T *bias, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    o[i] = fromC<T>(toC(o[i]) + toC(bias[i % cols]));
}

//===----------------------------------------------------------------------===//
// cuBLAS
//===----------------------------------------------------------------------===//

cublasHandle_t blasHandle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
      return static_cast<cublasHandle_t>(nullptr);
    cublasSetStream(h, computeStream());
    return h;
  }();
  return handle;
}

bool gemmType(DType t, cudaDataType &out) {
  switch (t) {
  case DType::F32: out = CUDA_R_32F; return true;
  case DType::F16: out = CUDA_R_16F; return true;
  case DType::BF16: out = CUDA_R_16BF; return true;
  case DType::F64: out = CUDA_R_64F; return true;
  default: return false;
  }
}

const uint8_t *elementAt(const void *base, int64_t offset, DType t) {
  return static_cast<const uint8_t *>(base) + offset * dtypeSize(t);
}

/// Zeros the `batch` blocks of C a GEMM with no inner dimension writes.
Status zeroGemmResult(const RowMajorGemm &g, void *c, DType cType) {
  size_t width = g.m * g.n * dtypeSize(cType);
  size_t pitch = g.batch > 1 ? g.strideC * dtypeSize(cType) : width;
  return cudaStatus(
      cudaMemset2DAsync(const_cast<uint8_t *>(elementAt(c, g.offsetC, cType)),
                        pitch, 0, width, g.batch, computeStream()),
      "gemm (empty inner dimension)");
}

/// Runs a row-major GEMM plan (mp/Runtime/cuda/Plans.h): A and B of
/// `abType`, C of `cType`, C = alpha · A · op(B), accumulated in fp32 (fp64
/// for fp64 operands, which need an fp64 C).
Status gemm(const RowMajorGemm &g, DType abType, const void *a, const void *b,
            DType cType, void *c, float alpha = 1.0f) {
  cudaDataType ab, ct;
  if (!gemmType(abType, ab))
    return typeError("gemm", abType);
  if (!gemmType(cType, ct) || (abType == DType::F64) != (cType == DType::F64))
    return typeError("gemm (result)", cType);
  if (g.m * g.n * g.batch == 0)
    return Status::success();
  if (g.k == 0)
    return zeroGemmResult(g, c, cType);
  cublasHandle_t h = blasHandle();
  if (!h)
    return Status::error("cublasCreate failed (no usable GPU?)");
  const ColumnMajorGemm cm = columnMajor(g);
  // Alpha and beta have the compute type.
  const bool fp64 = abType == DType::F64;
  const float beta = 0.0f;
  const double alpha64 = alpha, beta64 = 0.0;
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      h, cm.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
      static_cast<int>(cm.m), static_cast<int>(cm.n), static_cast<int>(cm.k),
      fp64 ? static_cast<const void *>(&alpha64) : &alpha,
      elementAt(b, cm.offsetFirst, abType), ab, static_cast<int>(cm.ldFirst),
      cm.strideFirst, elementAt(a, cm.offsetSecond, abType), ab,
      static_cast<int>(cm.ldSecond), cm.strideSecond,
      fp64 ? static_cast<const void *>(&beta64) : &beta,
      const_cast<uint8_t *>(elementAt(c, cm.offsetC, cType)), ct,
      static_cast<int>(cm.ldC), cm.strideC, static_cast<int>(cm.batch),
      fp64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error(std::string("cuBLAS GEMM failed: ") +
                         cublasGetStatusString(s));
  return Status::success();
}

/// One thread per element of C (integer matmuls are rare and small).
template <typename T>
__global__ void integerGemmKernel(RowMajorGemm g, const T *a, const T *b,
                                  T *c) {
  const int64_t total = g.batch * g.m * g.n;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int64_t j = t % g.n, i = (t / g.n) % g.m, batch = t / (g.m * g.n);
    c[gemmOffsetC(g, batch, i, j)] = integerGemmElement(g, a, b, batch, i, j);
  }
}

Status integerGemm(const RowMajorGemm &g, const Tensor &a, const Tensor &b,
                   Tensor &c) {
  const int64_t total = g.batch * g.m * g.n;
  if (total == 0)
    return Status::success();
  MP_INTEGER_TYPES(a.dtype, "matmul",
                   integerGemmKernel<<<blocksFor(total), kThreads, 0,
                                       computeStream()>>>(
                       g, a.as<T>(), b.as<T>(), c.as<T>()));
  return launched("matmul");
}

/// Scratch of the kernels on the compute stream: attention scores (chunks
/// keep them within kAttentionScratchBudget) and the cross-entropy
/// accumulator. Stream order keeps one kernel's use apart from the next's.
/// The executor reserves the largest need at load (prepare).
DeviceScratch &kernelScratch() {
  static DeviceScratch scratch("cudaMalloc (kernel scratch)");
  return scratch;
}

AttentionShape attentionShapeOf(const Tensor &q, const Tensor &k,
                                const Tensor &v) {
  return {q.shape[0], q.shape[1], k.shape[1], q.shape[2],
          k.shape[2], q.shape[3], v.shape[3]};
}

int64_t bytesPerScoreOf(DType t) {
  return attentionBytesPerScore(dtypeSize(t), t == DType::F32);
}

/// Sums accumulate as on the CPU: floats in fp64, integers in 64 bits with
/// wrap-around.
template <typename T> struct SumOf { using type = double; };
template <> struct SumOf<int64_t> { using type = int64_t; };
template <> struct SumOf<int32_t> { using type = int64_t; };

template <typename A> __device__ __forceinline__ A accumulate(A acc, A v) {
  if constexpr (std::is_integral_v<A>)
    return wrapAdd(acc, v);
  else
    return acc + v;
}

/// The identity of max (`largest` false) or min: +-inf for floats, the
/// integer type's limits for integers.
template <typename V> __device__ __forceinline__ V extremeOf(bool largest) {
  if constexpr (std::is_floating_point_v<V>)
    return largest ? V(INFINITY) : V(-INFINITY);
  else if constexpr (sizeof(V) == 8)
    return largest ? V(INT64_MAX) : V(INT64_MIN);
  else if constexpr (sizeof(V) == 4)
    return largest ? V(INT32_MAX) : V(INT32_MIN);
  else
    return largest ? V(INT8_MAX) : V(INT8_MIN);
}

/// Max (kind 2) or min (kind 3) of acc and v, propagating NaN as the CPU
/// does.
template <typename V> __device__ __forceinline__ V pick(int kind, V acc, V v) {
  const bool better = kind == 2 ? v > acc : v < acc;
  return (better || v != v) && acc == acc ? v : acc;
}

/// A sum, or for kind 1 the mean of `count` elements (integers truncate; an
/// empty integer mean is 0).
template <typename A>
__device__ __forceinline__ A finishSum(int kind, A sum, int64_t count) {
  if (kind != 1)
    return sum;
  if constexpr (std::is_integral_v<A>)
    return count ? sum / count : 0;
  else
    return sum / count;
}

/// Reduces elements index, index + stride, ... < count of one output:
/// kind 0 sum, 1 mean, 2 max, 3 min. Sums are partial (finishSum comes
/// after combining threads' parts).
template <typename T, typename Element>
__device__ void reduceRange(int kind, Element element, int64_t index,
                            int64_t stride, int64_t count,
                            typename SumOf<Compute<T>>::type &sum,
                            Compute<T> &extreme) {
  using V = Compute<T>;
  using A = typename SumOf<V>::type;
  sum = 0;
  extreme = extremeOf<V>(kind == 3);
  for (int64_t r = index; r < count; r += stride) {
    if (kind <= 1)
      sum = accumulate(sum, A(element(r)));
    else
      extreme = pick(kind, extreme, element(r));
  }
}

/// One thread per output element (short reductions).
template <typename T>
__global__ void reduceKernel(int kind, const T *x, T *o, int64_t n,
                             Dims keptDims, Strides keptSt, Dims redDims,
                             Strides redSt, int64_t count) {
  using V = Compute<T>;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const T *in = x + offsetOf(i, keptDims, keptSt);
    auto element = [&](int64_t r) { return toC(in[offsetOf(r, redDims, redSt)]); };
    typename SumOf<V>::type sum;
    V extreme;
    reduceRange<T>(kind, element, 0, 1, count, sum, extreme);
    o[i] = fromC<T>(kind <= 1 ? V(finishSum(kind, sum, count)) : extreme);
  }
}

/// One block per output element (long reductions, e.g. a full sum).
template <typename T>
__global__ void reduceBlockKernel(int kind, const T *x, T *o, Dims keptDims,
                                  Strides keptSt, Dims redDims, Strides redSt,
                                  int64_t count) {
  using V = Compute<T>;
  using A = typename SumOf<V>::type;
  __shared__ A sharedSums[32];
  __shared__ V sharedExtremes[32];
  const T *in = x + offsetOf(blockIdx.x, keptDims, keptSt);
  auto element = [&](int64_t r) { return toC(in[offsetOf(r, redDims, redSt)]); };
  A sum;
  V extreme;
  reduceRange<T>(kind, element, threadIdx.x, blockDim.x, count, sum, extreme);
  if (kind <= 1) {
    sum = blockReduce(sum, sharedSums, A(0),
                      [](A a, A b) { return accumulate(a, b); });
    if (threadIdx.x == 0)
      o[blockIdx.x] = fromC<T>(V(finishSum(kind, sum, count)));
  } else {
    extreme = blockReduce(extreme, sharedExtremes, extremeOf<V>(kind == 3),
                          [kind](V a, V b) { return pick(kind, a, b); });
    if (threadIdx.x == 0)
      o[blockIdx.x] = fromC<T>(extreme);
  }
}

template <typename T>
__global__ void crossEntropyKernel(const T *logits, const void *targets,
                                   bool t64, int64_t vocab, int64_t rows,
                                   float *out) {
  __shared__ float shared[32];
  const T *row = logits + blockIdx.x * vocab;
  float sum;
  float m = rowMaxExpSum(row, vocab, shared, sum);
  if (threadIdx.x == 0) {
    int64_t t = t64 ? static_cast<const int64_t *>(targets)[blockIdx.x]
                    : static_cast<const int32_t *>(targets)[blockIdx.x];
    atomicAdd(out, (logf(sum) + m - toC(row[t])) / rows);
  }
}

template <typename E>
__global__ void triluKernel(const E *x, E *o, int64_t n, int64_t rows,
                            int64_t cols, bool upper, int64_t k) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = i % cols, r = (i / cols) % rows;
    bool keep = upper ? c - r >= k : c - r <= k;
    o[i] = keep ? x[i] : E(0);
  }
}

__global__ void vocabEmbeddingKernel(const uint8_t *table, const void *ids,
                                     bool ids64, uint8_t *out, int64_t count,
                                     int64_t rows, int64_t rowBytes,
                                     int64_t offset) {
  int64_t total = count * rowBytes;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t k = t / rowBytes, byte = t % rowBytes;
    int64_t id = ids64 ? static_cast<const int64_t *>(ids)[k]
                       : static_cast<const int32_t *>(ids)[k];
    int64_t local = id - offset;
    out[t] = local >= 0 && local < rows ? table[local * rowBytes + byte] : 0;
  }
}

} // namespace

int deviceCount(std::string &reason) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    reason = std::string("no usable GPU: ") + cudaGetErrorString(err);
    return 0;
  }
  if (n == 0)
    reason = "no GPU is visible";
  return n;
}

Status allocate(size_t bytes, void **ptr) {
  return cudaStatus(cudaMalloc(ptr, std::max<size_t>(bytes, 1)), "cudaMalloc");
}
void release(void *ptr) { cudaFree(ptr); }
/// Host copies are ordered on the compute stream and complete on return.
static Status hostCopy(void *dst, const void *src, size_t bytes,
                       cudaMemcpyKind kind, const char *what) {
  if (Status s = cudaStatus(
          cudaMemcpyAsync(dst, src, bytes, kind, computeStream()), what);
      !s)
    return s;
  return cudaStatus(cudaStreamSynchronize(computeStream()), what);
}
Status copyToDevice(void *dst, const void *src, size_t bytes) {
  return hostCopy(dst, src, bytes, cudaMemcpyHostToDevice, "copy to device");
}
Status copyToHost(void *dst, const void *src, size_t bytes) {
  return hostCopy(dst, src, bytes, cudaMemcpyDeviceToHost, "copy to host");
}
Status synchronize() {
  if (Status s = cudaStatus(cudaStreamSynchronize(commStream()),
                            "synchronize (communication stream)");
      !s)
    return s;
  return cudaStatus(cudaStreamSynchronize(computeStream()),
                    "synchronize (compute stream)");
}

Status binary(cpu::BinaryKind kind, const Tensor &a, const Tensor &b,
              Tensor &out) {
  if (Status s = sameTypes("binary", {&a, &b, &out}); !s)
    return s;
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(out.shape);
  Strides sa = broadcastStrides(out.shape, a.shape),
          sb = broadcastStrides(out.shape, b.shape);
  coalesce(dims, {&sa, &sb});
  const int k = static_cast<int>(kind);
  const int grid = blocksFor(n);
  switch (a.dtype) {
    MP_INTEGER_CASES(integerBinaryKernel<<<grid, kThreads, 0, computeStream()>>>(
        k, a.as<T>(), b.as<T>(), out.as<T>(), n, dims, sa, sb))
  default:
    MP_REAL_TYPES(a.dtype, "binary",
                  binaryKernel<<<grid, kThreads, 0, computeStream()>>>(
                      k, a.as<T>(), b.as<T>(), out.as<T>(), n, dims, sa, sb));
  }
  return launched("binary");
}

Status compare(cpu::CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out) {
  if (Status s = sameTypes("compare", {&a, &b}); !s)
    return s;
  if (out.dtype != DType::Bool)
    return typeError("compare (result)", out.dtype);
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(out.shape);
  Strides sa = broadcastStrides(out.shape, a.shape),
          sb = broadcastStrides(out.shape, b.shape);
  coalesce(dims, {&sa, &sb});
  MP_ALL_TYPES(a.dtype, "compare",
               compareKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                   static_cast<int>(kind), a.as<T>(), b.as<T>(),
                   out.as<uint8_t>(), n, dims, sa, sb));
  return launched("compare");
}

Status where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Tensor &out) {
  if (Status s = sameTypes("where", {&a, &b, &out}); !s)
    return s;
  if (cond.dtype != DType::Bool)
    return typeError("where (condition)", cond.dtype);
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(out.shape);
  Strides sc = broadcastStrides(out.shape, cond.shape),
          sa = broadcastStrides(out.shape, a.shape),
          sb = broadcastStrides(out.shape, b.shape);
  coalesce(dims, {&sc, &sa, &sb});
  // Any element type: only bytes move.
  switch (dtypeSize(a.dtype)) {
  case 1: whereKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(cond.as<uint8_t>(), a.as<uint8_t>(), b.as<uint8_t>(), out.as<uint8_t>(), n, dims, sc, sa, sb); break;
  case 2: whereKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(cond.as<uint8_t>(), a.as<uint16_t>(), b.as<uint16_t>(), out.as<uint16_t>(), n, dims, sc, sa, sb); break;
  case 4: whereKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(cond.as<uint8_t>(), a.as<uint32_t>(), b.as<uint32_t>(), out.as<uint32_t>(), n, dims, sc, sa, sb); break;
  case 8: whereKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(cond.as<uint8_t>(), a.as<uint64_t>(), b.as<uint64_t>(), out.as<uint64_t>(), n, dims, sc, sa, sb); break;
  default: return typeError("where", a.dtype);
  }
  return launched("where");
}

Status unary(cpu::UnaryKind kind, const Tensor &x, Tensor &out) {
  if (Status s = sameTypes("unary", {&x, &out}); !s)
    return s;
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  const int grid = blocksFor(n);
  const bool integerKind =
      kind == cpu::UnaryKind::Neg || kind == cpu::UnaryKind::Relu;
  switch (x.dtype) {
    MP_INTEGER_CASES(
        if (!integerKind) return typeError("unary", x.dtype);
        integerUnaryKernel<<<grid, kThreads, 0, computeStream()>>>(
            kind == cpu::UnaryKind::Relu, x.as<T>(), out.as<T>(), n))
  default:
    MP_REAL_TYPES(x.dtype, "unary",
                  unaryKernel<<<grid, kThreads, 0, computeStream()>>>(
                      static_cast<int>(kind), x.as<T>(), out.as<T>(), n));
  }
  return launched("unary");
}

/// Casts from source type S to out's element type.
template <typename S> static Status castFrom(const S *x, Tensor &out, int64_t n) {
  MP_ALL_TYPES(out.dtype, "cast (result)",
               castKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                   x, out.as<T>(), n));
  return launched("cast");
}

Status cast(const Tensor &x, Tensor &out) {
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  if (x.dtype == out.dtype) // exact, also for 64-bit integers
    return copy(x, out);
  MP_ALL_TYPES(x.dtype, "cast", return castFrom(x.as<T>(), out, n));
  return Status::success();
}

Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out) {
  if (Status s = sameTypes("linear", {&x, &weight, bias, &out}); !s)
    return s;
  RowMajorGemm g;
  g.k = x.shape.back();
  g.n = out.shape.back();
  g.m = out.numel() / std::max<int64_t>(g.n, 1); // also when k == 0
  g.transB = transposeWeight;
  if (Status s = gemm(g, x.dtype, x.data, weight.data, out.dtype, out.data);
      !s)
    return s;
  int64_t n = out.numel();
  if (!bias || n == 0)
    return Status::success();
  MP_FLOAT_TYPES(out.dtype, "linear bias",
                 addBiasKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     out.as<T>(), bias->as<T>(), n, g.n));
  return launched("linear bias");
}

Status matmul(const Tensor &a, const Tensor &b, Tensor &out) {
  if (Status s = sameTypes("matmul", {&a, &b, &out}); !s)
    return s;
  std::string error;
  std::vector<RowMajorGemm> plan = matmulPlan(a.shape, b.shape, error);
  if (!error.empty())
    return Status::error(error);
  const bool integer = a.dtype == DType::I64 || a.dtype == DType::I32 ||
                       a.dtype == DType::I8;
  for (const RowMajorGemm &g : plan)
    if (Status s = integer ? integerGemm(g, a, b, out)
                           : gemm(g, a.dtype, a.data, b.data, out.dtype,
                                  out.data);
        !s)
      return s;
  return Status::success();
}

Status layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, float epsilon, Tensor &out) {
  if (Status s = sameTypes("layer_norm", {&x, &scale, bias, &out}); !s)
    return s;
  int64_t inner = 1;
  for (size_t d = axis; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t rows = inner ? x.numel() / inner : 0;
  if (rows == 0)
    return Status::success();
  MP_FLOAT_TYPES(x.dtype, "layer_norm",
                 layerNormKernel<<<rows, kThreads, 0, computeStream()>>>(
                     x.as<T>(), scale.as<T>(), bias ? bias->as<T>() : nullptr,
                     out.as<T>(), inner, epsilon, false));
  return launched("layer_norm");
}

Status rmsNorm(const Tensor &x, const Tensor &scale, float epsilon,
               Tensor &out) {
  if (Status s = sameTypes("rms_norm", {&x, &scale, &out}); !s)
    return s;
  int64_t inner = x.shape.back();
  int64_t rows = inner ? x.numel() / inner : 0;
  if (rows == 0)
    return Status::success();
  MP_FLOAT_TYPES(x.dtype, "rms_norm",
                 layerNormKernel<<<rows, kThreads, 0, computeStream()>>>(
                     x.as<T>(), scale.as<T>(), static_cast<const T *>(nullptr),
                     out.as<T>(), inner, epsilon, true));
  return launched("rms_norm");
}

Status softmax(const Tensor &x, int64_t axis, Tensor &out) {
  if (Status s = sameTypes("softmax", {&x, &out}); !s)
    return s;
  int64_t dim = x.shape[axis], inner = 1;
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t outer = dim * inner ? x.numel() / (dim * inner) : 0;
  if (outer == 0)
    return Status::success();
  MP_REAL_TYPES(
      x.dtype, "softmax",
      if (inner == 1) softmaxLastKernel<<<outer, kThreads, 0, computeStream()>>>(x.as<T>(),
                                                             out.as<T>(), dim);
      else softmaxStridedKernel<<<blocksFor(outer * inner), kThreads, 0, computeStream()>>>(
          x.as<T>(), out.as<T>(), outer, dim, inner));
  return launched("softmax");
}

/// Attention chunk by chunk: scores = scale · Q·K^T (fp32, strided-batched
/// over (batch, kv head) pairs, the query heads of a group as one block of
/// rows), a masked softmax into probabilities, then out = P·V.
Status attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, float scale, bool causal, Tensor &out) {
  if (Status s = sameTypes("attention", {&q, &k, &v, mask, &out}); !s)
    return s;
  if (!isFloatType(q.dtype))
    return typeError("attention", q.dtype);
  const AttentionShape shape = attentionShapeOf(q, k, v);
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0)
    return Status::error("attention: query heads do not group into the "
                         "key/value heads");
  if (out.numel() == 0)
    return Status::success();
  if (shape.keys == 0) // no key to attend to: zeros, as on the CPU
    return cudaStatus(cudaMemsetAsync(out.data, 0, out.bytes(), computeStream()),
                      "attention");
  const DType t = q.dtype;
  const bool separateProbs = t != DType::F32;
  const int64_t bytesPerScore = bytesPerScoreOf(t);
  const std::vector<int64_t> full = {shape.batch, shape.heads, shape.queries,
                                     shape.keys};
  Dims maskDims = dimsOf(full);
  Strides maskStrides = mask ? broadcastStrides(full, mask->shape) : Strides();
  coalesce(maskDims, {&maskStrides});
  for (const AttentionChunk &c :
       attentionChunks(shape, bytesPerScore, kAttentionScratchBudget)) {
    const int64_t rows = c.pairs * c.rows;
    if (Status s = kernelScratch().reserve(rows * shape.keys * bytesPerScore);
        !s)
      return s;
    void *scratch = kernelScratch().get();
    float *scores = static_cast<float *>(scratch);
    void *probs = separateProbs ? static_cast<void *>(scores + rows * shape.keys)
                                : scratch;
    if (Status s = gemm(attentionScoresGemm(shape, c), t, q.data, k.data,
                        DType::F32, scores, scale);
        !s)
      return s;
    MP_FLOAT_TYPES(
        t, "attention",
        attentionSoftmaxKernel<<<rows, kThreads, 0, computeStream()>>>(
            scores, static_cast<T *>(probs), shape.keys, shape.queries,
            c.rowBase(shape), causal, mask ? mask->as<T>() : nullptr,
            maskDims, maskStrides));
    if (Status s = launched("attention softmax"); !s)
      return s;
    if (Status s = gemm(attentionValuesGemm(shape, c), t, probs, v.data, t,
                        out.data);
        !s)
      return s;
  }
  return Status::success();
}

Status gather(const Tensor &x, const Tensor &indices, int64_t axis,
              Tensor &out) {
  int64_t outer = 1, inner = dtypeSize(x.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t count = indices.numel(), total = outer * count * inner;
  if (total == 0)
    return Status::success();
  gatherRowsKernel<<<blocksFor(total), kThreads, 0, computeStream()>>>(
      x.as<uint8_t>(), indices.data, indices.dtype == DType::I64,
      out.as<uint8_t>(), outer, count, x.shape[axis], inner);
  return launched("gather");
}

Status transpose(const Tensor &x, const std::vector<int64_t> &perm,
                 Tensor &out) {
  std::vector<int64_t> inStrides(x.shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(x.shape.size()) - 2; d >= 0; --d)
    inStrides[d] = inStrides[d + 1] * x.shape[d + 1];
  Strides st;
  for (size_t i = 0; i < perm.size(); ++i)
    st.s[i] = inStrides[perm[i]];
  return gatherBytes(x, out, st, "transpose");
}

Status expand(const Tensor &x, Tensor &out) {
  return gatherBytes(x, out, broadcastStrides(out.shape, x.shape), "expand");
}

Status copy(const Tensor &x, Tensor &out) {
  return cudaStatus(cudaMemcpyAsync(out.data, x.data, x.bytes(),
                                    cudaMemcpyDeviceToDevice, computeStream()),
                    "copy");
}

Status reduce(cpu::ReduceKind kind, const Tensor &x,
              const std::vector<int64_t> &axes, Tensor &out) {
  if (Status s = sameTypes("reduce", {&x, &out}); !s)
    return s;
  Strides in = contiguous(x.shape), keptSt, redSt;
  std::vector<int64_t> kept, reduced;
  Dims keptDims, redDims;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    bool isReduced = std::find(axes.begin(), axes.end(),
                               static_cast<int64_t>(d)) != axes.end();
    if (isReduced) {
      redSt.s[reduced.size()] = in.s[d];
      reduced.push_back(x.shape[d]);
    } else {
      keptSt.s[kept.size()] = in.s[d];
      kept.push_back(x.shape[d]);
    }
  }
  keptDims = dimsOf(kept);
  redDims = dimsOf(reduced);
  coalesce(keptDims, {&keptSt});
  coalesce(redDims, {&redSt});
  int64_t n = out.numel(), count = 1;
  for (int64_t d : reduced)
    count *= d;
  if (n == 0)
    return Status::success();
  // A block per output once each thread of it gets a few elements.
  const bool blockPerOutput = count >= 4 * kThreads && n <= INT32_MAX;
  auto launch = [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    if (blockPerOutput)
      reduceBlockKernel<<<static_cast<unsigned>(n), kThreads, 0,
                          computeStream()>>>(static_cast<int>(kind), typed,
                                             out.as<T>(), keptDims, keptSt,
                                             redDims, redSt, count);
    else
      reduceKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
          static_cast<int>(kind), typed, out.as<T>(), n, keptDims, keptSt,
          redDims, redSt, count);
  };
  switch (x.dtype) {
    MP_CASE(I64, int64_t, launch(x.as<T>()))
    MP_CASE(I32, int32_t, launch(x.as<T>()))
  default:
    MP_REAL_TYPES(x.dtype, "reduce", launch(x.as<T>()));
  }
  return launched("reduce");
}

/// The mean loss accumulates in fp32 (in `out` itself when it is fp32, else
/// in a device float, then cast to fp16/bf16).
Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out) {
  float *sum = out.dtype == DType::F32 ? out.as<float>() : nullptr;
  if (!sum) {
    if (out.dtype != DType::F16 && out.dtype != DType::BF16)
      return typeError("cross_entropy (result)", out.dtype);
    if (Status s = kernelScratch().reserve(sizeof(float)); !s)
      return s;
    sum = static_cast<float *>(kernelScratch().get());
  }
  int64_t vocab = logits.shape.back();
  int64_t rows = vocab ? logits.numel() / vocab : 0;
  if (Status s = cudaStatus(
          cudaMemsetAsync(sum, 0, sizeof(float), computeStream()), "memset");
      !s)
    return s;
  if (rows > 0) {
    MP_FLOAT_TYPES(logits.dtype, "cross_entropy",
                   crossEntropyKernel<<<rows, kThreads, 0, computeStream()>>>(
                       logits.as<T>(), targets.data,
                       targets.dtype == DType::I64, vocab, rows, sum));
    if (Status s = launched("cross_entropy"); !s)
      return s;
  }
  if (sum == out.data)
    return Status::success();
  return cast(Tensor{sum, DType::F32, out.shape}, out);
}

size_t attentionScratchBytes(const Tensor &q, const Tensor &k,
                             const Tensor &v) {
  const AttentionShape shape = attentionShapeOf(q, k, v);
  if (shape.kvHeads <= 0 || shape.heads % shape.kvHeads != 0 ||
      !isFloatType(q.dtype))
    return 0; // attention() rejects it
  return static_cast<size_t>(attentionScratchBytes(
      shape, bytesPerScoreOf(q.dtype), kAttentionScratchBudget));
}

size_t crossEntropyScratchBytes(const Tensor &out) {
  return out.dtype == DType::F32 ? 0 : sizeof(float);
}

Status prepare(size_t scratchBytes) {
  computeStream(); // created now, not in the first step
  commStream();
  if (!blasHandle())
    return Status::error("cublasCreate failed");
  return kernelScratch().reserve(scratchBytes);
}

size_t scratchBytes() { return kernelScratch().capacity(); }

/// Einsum appears only in small constant-like subgraphs (the importer folds
/// most of them), so it runs on the host: the operands are copied out, the
/// CPU kernel runs, and the result is copied back.
Status einsum(const std::string &equation,
              const std::vector<const Tensor *> &inputs, Tensor &out) {
  std::vector<std::vector<uint8_t>> bytes(inputs.size());
  std::vector<Tensor> host(inputs.size());
  std::vector<const Tensor *> operands;
  for (size_t i = 0; i < inputs.size(); ++i) {
    bytes[i].resize(inputs[i]->bytes());
    if (Status s = copyToHost(bytes[i].data(), inputs[i]->data,
                              inputs[i]->bytes());
        !s)
      return s;
    host[i] = Tensor{bytes[i].data(), inputs[i]->dtype, inputs[i]->shape};
    operands.push_back(&host[i]);
  }
  std::vector<uint8_t> result(out.bytes());
  Tensor hostOut{result.data(), out.dtype, out.shape};
  if (Status s = cpu::einsum(equation, operands, hostOut); !s)
    return s;
  return copyToDevice(out.data, result.data(), out.bytes());
}

Status trilu(const Tensor &x, bool upper, int64_t k, Tensor &out) {
  int64_t n = x.numel();
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  if (n == 0)
    return Status::success();
  switch (dtypeSize(x.dtype)) {
  case 1: triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.as<uint8_t>(), out.as<uint8_t>(), n, rows, cols, upper, k); break;
  case 2: triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.as<uint16_t>(), out.as<uint16_t>(), n, rows, cols, upper, k); break;
  case 4: triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.as<uint32_t>(), out.as<uint32_t>(), n, rows, cols, upper, k); break;
  case 8: triluKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.as<uint64_t>(), out.as<uint64_t>(), n, rows, cols, upper, k); break;
  default: return typeError("trilu", x.dtype);
  }
  return launched("trilu");
}

Status slice(const Tensor &x, const std::vector<int64_t> &starts,
             const std::vector<int64_t> &strides, Tensor &out) {
  Strides in = contiguous(x.shape), st;
  int64_t base = 0;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    st.s[d] = in.s[d] * strides[d];
    base += starts[d] * in.s[d];
  }
  return moveBytes(x, out.data, out.shape, st, base, contiguous(out.shape), 0,
                   "slice");
}

Status concat(const std::vector<const Tensor *> &inputs, int64_t axis,
              Tensor &out) {
  Strides outSt = contiguous(out.shape);
  int64_t offset = 0;
  for (const Tensor *t : inputs) {
    if (Status s = moveBytes(*t, out.data, t->shape, contiguous(t->shape), 0,
                             outSt, offset * outSt.s[axis], "concat");
        !s)
      return s;
    offset += t->shape[axis];
  }
  return Status::success();
}

Status split(const Tensor &x, int64_t axis, const std::vector<Tensor *> &outs) {
  Strides inSt = contiguous(x.shape);
  int64_t offset = 0;
  for (Tensor *t : outs) {
    if (Status s = moveBytes(x, t->data, t->shape, inSt,
                             offset * inSt.s[axis], contiguous(t->shape), 0,
                             "split");
        !s)
      return s;
    offset += t->shape[axis];
  }
  return Status::success();
}

Status vocabEmbedding(const Tensor &table, const Tensor &ids, int64_t offset,
                      Tensor &out) {
  int64_t rows = table.shape[0];
  int64_t rowBytes = rows ? static_cast<int64_t>(table.bytes()) / rows : 0;
  int64_t total = ids.numel() * rowBytes;
  if (total == 0)
    return Status::success();
  vocabEmbeddingKernel<<<blocksFor(total), kThreads, 0, computeStream()>>>(
      table.as<uint8_t>(), ids.data, ids.dtype == DType::I64,
      out.as<uint8_t>(), ids.numel(), rows, rowBytes, offset);
  return launched("vocab-parallel embedding");
}

} // namespace mp::rt::cuda
