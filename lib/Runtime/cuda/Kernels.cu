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

int blocksFor(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads,
                                            65535LL * 16));
}

__device__ double load(const void *p, DType t, int64_t i) {
  switch (t) {
  case DType::F32: return static_cast<const float *>(p)[i];
  case DType::F64: return static_cast<const double *>(p)[i];
  case DType::F16: return __half2float(static_cast<const __half *>(p)[i]);
  case DType::BF16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case DType::I64: return static_cast<double>(static_cast<const int64_t *>(p)[i]);
  case DType::I32: return static_cast<const int32_t *>(p)[i];
  case DType::I8: return static_cast<const int8_t *>(p)[i];
  case DType::Bool: return static_cast<const uint8_t *>(p)[i];
  }
  return 0;
}

__device__ void store(void *p, DType t, int64_t i, double v) {
  switch (t) {
  case DType::F32: static_cast<float *>(p)[i] = static_cast<float>(v); return;
  case DType::F64: static_cast<double *>(p)[i] = v; return;
  case DType::F16: static_cast<__half *>(p)[i] = __float2half(static_cast<float>(v)); return;
  case DType::BF16:
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16(static_cast<float>(v));
    return;
  case DType::I64: static_cast<int64_t *>(p)[i] = static_cast<int64_t>(v); return;
  case DType::I32: static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v); return;
  case DType::I8: static_cast<int8_t *>(p)[i] = static_cast<int8_t>(v); return;
  case DType::Bool: static_cast<uint8_t *>(p)[i] = v != 0; return;
  }
}

/// Float element types compute in fp32 (fp16/bf16 are storage formats).
__device__ __forceinline__ float toF(float v) { return v; }
__device__ __forceinline__ float toF(__half v) { return __half2float(v); }
__device__ __forceinline__ float toF(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <typename T> __device__ __forceinline__ T fromF(float v);
template <> __device__ __forceinline__ float fromF<float>(float v) { return v; }
template <> __device__ __forceinline__ __half fromF<__half>(float v) {
  return __float2half(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

/// Runs `body` with `T` bound to the C++ type of a float DType.
#define MP_FLOAT_TYPES(dtype, kernel, ...)                                    \
  switch (dtype) {                                                            \
  case DType::F32: { using T = float; __VA_ARGS__; break; }                   \
  case DType::F16: { using T = __half; __VA_ARGS__; break; }                  \
  case DType::BF16: { using T = __nv_bfloat16; __VA_ARGS__; break; }          \
  default: return typeError(kernel, dtype);                                   \
  }

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void binaryKernel(int kind, const T *a, const T *b, T *o, int64_t n,
                             Dims dims, Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float x = toF(a[offsetOf(i, dims, sa)]), y = toF(b[offsetOf(i, dims, sb)]);
    float r = 0;
    switch (kind) {
    case 0: r = x + y; break;
    case 1: r = x - y; break;
    case 2: r = x * y; break;
    case 3: r = x / y; break;
    case 4: r = powf(x, y); break;
    }
    o[i] = fromF<T>(r);
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

__global__ void compareKernel(int kind, const void *a, const void *b,
                              DType t, uint8_t *o, int64_t n, Dims dims,
                              Strides sa, Strides sb) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    double x = load(a, t, offsetOf(i, dims, sa));
    double y = load(b, t, offsetOf(i, dims, sb));
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

template <typename T>
__global__ void unaryKernel(int kind, const T *x, T *o, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    float v = toF(x[i]), r = 0;
    switch (static_cast<cpu::UnaryKind>(kind)) {
    case cpu::UnaryKind::Neg: r = -v; break;
    case cpu::UnaryKind::Exp: r = expf(v); break;
    case cpu::UnaryKind::Log: r = logf(v); break;
    case cpu::UnaryKind::Sqrt: r = sqrtf(v); break;
    case cpu::UnaryKind::Rsqrt: r = rsqrtf(v); break;
    case cpu::UnaryKind::Reciprocal: r = 1.0f / v; break;
    case cpu::UnaryKind::Tanh: r = tanhf(v); break;
    case cpu::UnaryKind::Erf: r = erff(v); break;
    case cpu::UnaryKind::Sigmoid: r = 1.0f / (1.0f + expf(-v)); break;
    case cpu::UnaryKind::Relu: r = v > 0 ? v : 0.0f; break;
    case cpu::UnaryKind::Silu: r = v / (1.0f + expf(-v)); break;
    case cpu::UnaryKind::Gelu: r = 0.5f * v * (1.0f + erff(v * 0.70710678f)); break;
    case cpu::UnaryKind::GeluTanh:
      r = 0.5f * v *
          (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
      break;
    case cpu::UnaryKind::Cos: r = cosf(v); break;
    case cpu::UnaryKind::Sin: r = sinf(v); break;
    }
    o[i] = fromF<T>(r);
  }
}

__global__ void castKernel(const void *x, DType from, void *o, DType to,
                           int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    store(o, to, i, load(x, from, i));
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
/// gets the result. `shared` holds one float per warp.
template <typename Combine>
__device__ float blockReduce(float v, float *shared, float init,
                             Combine combine) {
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
  float total = shared[0];
  __syncthreads();
  return total;
}

__device__ float blockSum(float v, float *shared) {
  return blockReduce(v, shared, 0.0f,
                     [](float a, float b) { return a + b; });
}

__device__ float blockMax(float v, float *shared) {
  return blockReduce(v, shared, -FLT_MAX,
                     [](float a, float b) { return fmaxf(a, b); });
}

template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias,
                                T *o, int64_t inner, float eps, bool rms) {
  __shared__ float shared[32];
  const T *row = x + blockIdx.x * inner;
  T *out = o + blockIdx.x * inner;
  float sum = 0;
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
    sum += rms ? toF(row[i]) * toF(row[i]) : toF(row[i]);
  float mean = rms ? 0.0f : blockSum(sum, shared) / inner;
  float var;
  if (rms) {
    var = blockSum(sum, shared) / inner;
  } else {
    float sq = 0;
    for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
      sq += (toF(row[i]) - mean) * (toF(row[i]) - mean);
    var = blockSum(sq, shared) / inner;
  }
  float inv = rsqrtf(var + eps);
  for (int64_t i = threadIdx.x; i < inner; i += blockDim.x)
    out[i] = fromF<T>((toF(row[i]) - mean) * inv * toF(scale[i]) +
                      (bias ? toF(bias[i]) : 0.0f));
}

/// The block's max of a row and the sum of exp(x - max): a stable softmax
/// denominator.
template <typename T>
__device__ float rowMaxExpSum(const T *row, int64_t n, float *shared,
                              float &sum) {
  float m = -FLT_MAX;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    m = fmaxf(m, toF(row[i]));
  m = blockMax(m, shared);
  float s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    s += expf(toF(row[i]) - m);
  sum = blockSum(s, shared);
  return m;
}

template <typename T>
__global__ void softmaxLastKernel(const T *x, T *o, int64_t dim) {
  __shared__ float shared[32];
  const T *row = x + blockIdx.x * dim;
  T *out = o + blockIdx.x * dim;
  float sum;
  float m = rowMaxExpSum(row, dim, shared, sum);
  for (int64_t i = threadIdx.x; i < dim; i += blockDim.x)
    out[i] = fromF<T>(sum > 0 ? expf(toF(row[i]) - m) / sum : 0.0f);
}

template <typename T>
__global__ void softmaxStridedKernel(const T *x, T *o, int64_t outer,
                                     int64_t dim, int64_t inner) {
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
       t < outer * inner; t += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = (t / inner) * dim * inner + t % inner;
    float m = -FLT_MAX, sum = 0;
    for (int64_t a = 0; a < dim; ++a)
      m = fmaxf(m, toF(x[base + a * inner]));
    for (int64_t a = 0; a < dim; ++a)
      sum += expf(toF(x[base + a * inner]) - m);
    for (int64_t a = 0; a < dim; ++a) // a fully masked row gives zeros
      o[base + a * inner] =
          fromF<T>(sum > 0 ? expf(toF(x[base + a * inner]) - m) / sum : 0.0f);
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
      s += toF(mask[offsetOf(row * keys + j, maskDims, maskStrides)]);
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
    out[j] = fromF<T>(sum > 0 ? expf(logit(j) - m) / sum : 0.0f);
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
    o[i] = fromF<T>(toF(o[i]) + toF(bias[i % cols]));
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
/// `abType`, C of `cType`, fp32 accumulation, C = alpha · A · op(B).
Status gemm(const RowMajorGemm &g, DType abType, const void *a, const void *b,
            DType cType, void *c, float alpha = 1.0f) {
  cudaDataType ab, ct;
  if (!gemmType(abType, ab))
    return typeError("gemm", abType);
  if (!gemmType(cType, ct))
    return typeError("gemm (result)", cType);
  if (g.m * g.n * g.batch == 0)
    return Status::success();
  if (g.k == 0)
    return zeroGemmResult(g, c, cType);
  cublasHandle_t h = blasHandle();
  if (!h)
    return Status::error("cublasCreate failed (no usable GPU?)");
  const ColumnMajorGemm cm = columnMajor(g);
  const float beta = 0.0f;
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      h, cm.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
      static_cast<int>(cm.m), static_cast<int>(cm.n), static_cast<int>(cm.k),
      &alpha, elementAt(b, cm.offsetFirst, abType), ab,
      static_cast<int>(cm.ldFirst), cm.strideFirst,
      elementAt(a, cm.offsetSecond, abType), ab,
      static_cast<int>(cm.ldSecond), cm.strideSecond, &beta,
      const_cast<uint8_t *>(elementAt(c, cm.offsetC, cType)), ct,
      static_cast<int>(cm.ldC), cm.strideC, static_cast<int>(cm.batch),
      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error(std::string("cuBLAS GEMM failed: ") +
                         cublasGetStatusString(s));
  return Status::success();
}

/// Attention scores; attention chunks keep it within the budget.
DeviceScratch &attentionScratch() {
  static DeviceScratch scratch("cudaMalloc (attention scores)");
  return scratch;
}
constexpr int64_t kAttentionScratchBudget = 256LL << 20;

template <typename T>
__global__ void reduceKernel(int kind, const T *x, T *o, int64_t n,
                             Dims keptDims, Strides keptSt, Dims redDims,
                             Strides redSt, int64_t count) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t base = offsetOf(i, keptDims, keptSt);
    float acc = kind == 2 ? -INFINITY : kind == 3 ? INFINITY : 0.0f;
    for (int64_t r = 0; r < count; ++r) {
      float v = toF(x[base + offsetOf(r, redDims, redSt)]);
      // Max and min propagate NaN, as on the CPU (fmaxf/fminf would drop it).
      if (kind == 2)
        acc = (v > acc || isnan(v)) && !isnan(acc) ? v : acc;
      else if (kind == 3)
        acc = (v < acc || isnan(v)) && !isnan(acc) ? v : acc;
      else
        acc += v;
    }
    o[i] = fromF<T>(kind == 1 ? acc / count : acc);
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
    atomicAdd(out, (logf(sum) + m - toF(row[t])) / rows);
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
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(out.shape);
  Strides sa = broadcastStrides(out.shape, a.shape),
          sb = broadcastStrides(out.shape, b.shape);
  coalesce(dims, {&sa, &sb});
  const int k = static_cast<int>(kind);
  switch (a.dtype) {
  case DType::I64: integerBinaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(k, a.as<int64_t>(), b.as<int64_t>(), out.as<int64_t>(), n, dims, sa, sb); break;
  case DType::I32: integerBinaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(k, a.as<int32_t>(), b.as<int32_t>(), out.as<int32_t>(), n, dims, sa, sb); break;
  case DType::I8: integerBinaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(k, a.as<int8_t>(), b.as<int8_t>(), out.as<int8_t>(), n, dims, sa, sb); break;
  default:
    MP_FLOAT_TYPES(a.dtype, "binary",
                   binaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                       k, a.as<T>(), b.as<T>(), out.as<T>(), n, dims, sa, sb));
  }
  return launched("binary");
}

Status compare(cpu::CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out) {
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(out.shape);
  Strides sa = broadcastStrides(out.shape, a.shape),
          sb = broadcastStrides(out.shape, b.shape);
  coalesce(dims, {&sa, &sb});
  compareKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
      static_cast<int>(kind), a.data, b.data, a.dtype, out.as<uint8_t>(), n,
      dims, sa, sb);
  return launched("compare");
}

Status where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Tensor &out) {
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
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  MP_FLOAT_TYPES(x.dtype, "unary",
                 unaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     static_cast<int>(kind), x.as<T>(), out.as<T>(), n));
  return launched("unary");
}

Status cast(const Tensor &x, Tensor &out) {
  int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  if (x.dtype == out.dtype) // exact, also for 64-bit integers
    return copy(x, out);
  castKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.data, x.dtype, out.data, out.dtype,
                                         n);
  return launched("cast");
}

Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out) {
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
  std::string error;
  std::vector<RowMajorGemm> plan = matmulPlan(a.shape, b.shape, error);
  if (!error.empty())
    return Status::error(error);
  for (const RowMajorGemm &g : plan)
    if (Status s = gemm(g, a.dtype, a.data, b.data, out.dtype, out.data); !s)
      return s;
  return Status::success();
}

Status layerNorm(const Tensor &x, const Tensor &scale, const Tensor *bias,
                 int64_t axis, float epsilon, Tensor &out) {
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
  int64_t dim = x.shape[axis], inner = 1;
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t outer = dim * inner ? x.numel() / (dim * inner) : 0;
  if (outer == 0)
    return Status::success();
  MP_FLOAT_TYPES(
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
  const AttentionShape shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2],
                             k.shape[2], q.shape[3], v.shape[3]};
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
  const int64_t bytesPerScore =
      sizeof(float) + (separateProbs ? dtypeSize(t) : 0);
  const std::vector<int64_t> full = {shape.batch, shape.heads, shape.queries,
                                     shape.keys};
  Dims maskDims = dimsOf(full);
  Strides maskStrides = mask ? broadcastStrides(full, mask->shape) : Strides();
  coalesce(maskDims, {&maskStrides});
  for (const AttentionChunk &c :
       attentionChunks(shape, bytesPerScore, kAttentionScratchBudget)) {
    const int64_t rows = c.pairs * c.rows;
    if (Status s =
            attentionScratch().reserve(rows * shape.keys * bytesPerScore);
        !s)
      return s;
    void *scratch = attentionScratch().get();
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
  MP_FLOAT_TYPES(x.dtype, "reduce",
                 reduceKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     static_cast<int>(kind), x.as<T>(), out.as<T>(), n,
                     keptDims, keptSt, redDims, redSt, count));
  return launched("reduce");
}

/// The mean loss accumulates in fp32 (in `out` itself when it is fp32, else
/// in a device float, then cast to fp16/bf16).
Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out) {
  float *sum = out.dtype == DType::F32 ? out.as<float>() : nullptr;
  if (!sum) {
    if (out.dtype != DType::F16 && out.dtype != DType::BF16)
      return typeError("cross_entropy (result)", out.dtype);
    static DeviceScratch accumulator("cudaMalloc (cross_entropy)");
    if (Status s = accumulator.reserve(sizeof(float)); !s)
      return s;
    sum = static_cast<float *>(accumulator.get());
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
