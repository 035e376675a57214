//===- Kernels.cu - CUDA kernels ------------------------------------------===//
//
// Straightforward first versions: one thread per output element with
// broadcast strides for elementwise ops, one block per row for norms and
// softmax, one block per query row for attention, cuBLAS for GEMMs. They are
// written for correctness against the CPU kernels first; fused/tiled
// versions come with GPU benchmarking.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/CudaKernels.h"

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

constexpr int kMaxRank = 8;
constexpr int kThreads = 256;

/// Shape and per-operand strides passed by value to kernels.
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
};
struct Strides {
  int64_t s[kMaxRank] = {};
};

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

Dims dimsOf(const std::vector<int64_t> &shape) {
  Dims d;
  d.rank = static_cast<int>(shape.size());
  for (int i = 0; i < d.rank; ++i)
    d.size[i] = shape[i];
  return d;
}

/// Strides of `in` aligned to `out`'s dims; 0 where `in` broadcasts.
Strides broadcastStrides(const std::vector<int64_t> &out,
                         const std::vector<int64_t> &in) {
  Strides st;
  int64_t stride = 1;
  int offset = static_cast<int>(out.size() - in.size());
  for (int i = static_cast<int>(in.size()) - 1; i >= 0; --i) {
    st.s[i + offset] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return st;
}

__device__ int64_t offsetOf(int64_t index, const Dims &dims,
                            const Strides &st) {
  int64_t off = 0;
  for (int d = dims.rank - 1; d >= 0; --d) {
    off += (index % dims.size[d]) * st.s[d];
    index /= dims.size[d];
  }
  return off;
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
                 const Strides &inSt, int64_t inBase, const Strides &outSt,
                 int64_t outBase, const char *kernel) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  if (n == 0)
    return Status::success();
  Dims dims = dimsOf(shape);
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

/// One block per (batch, head, query): scores in shared memory, softmax,
/// then the weighted sum of values.
template <typename T>
__global__ void attentionKernel(const T *q, const T *k, const T *v,
                                const T *mask, Dims maskDims,
                                Strides maskStrides, T *o, int64_t H,
                                int64_t Hkv, int64_t Sq, int64_t Sk,
                                int64_t D, int64_t Dv, float scale,
                                bool causal) {
  extern __shared__ float scores[];
  __shared__ float shared[32];
  int64_t i = blockIdx.x % Sq, h = (blockIdx.x / Sq) % H, b = blockIdx.x / (Sq * H);
  int64_t hk = h / (H / Hkv);
  const T *qrow = q + ((b * H + h) * Sq + i) * D;
  const T *kbase = k + (b * Hkv + hk) * Sk * D;
  const T *vbase = v + (b * Hkv + hk) * Sk * Dv;
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x) {
    float s = -INFINITY;
    if (!causal || j <= i + (Sk - Sq)) {
      s = 0;
      for (int64_t d = 0; d < D; ++d)
        s += toF(qrow[d]) * toF(kbase[j * D + d]);
      s *= scale;
      if (mask)
        s += toF(mask[offsetOf(((b * H + h) * Sq + i) * Sk + j, maskDims,
                               maskStrides)]);
    }
    scores[j] = s;
    m = fmaxf(m, s);
  }
  m = blockMax(m, shared);
  float sum = 0;
  for (int64_t j = threadIdx.x; j < Sk; j += blockDim.x) {
    float p = m == -INFINITY ? 0.0f : expf(scores[j] - m);
    scores[j] = p;
    sum += p;
  }
  sum = blockSum(sum, shared);
  T *out = o + ((b * H + h) * Sq + i) * Dv;
  for (int64_t d = threadIdx.x; d < Dv; d += blockDim.x) {
    float acc = 0;
    for (int64_t j = 0; j < Sk; ++j)
      acc += scores[j] * toF(vbase[j * Dv + d]);
    out[d] = fromF<T>(sum > 0 ? acc / sum : 0.0f);
  }
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

__global__ void addBiasKernel(void *o, DType t, const void *bias, int64_t n,
                              int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    store(o, t, i, load(o, t, i) + load(bias, t, i % cols));
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

/// Row-major C[M,N] = A[M,K] · B (B is [K,N], or [N,K] when transB), with
/// fp32 accumulation, `batch` times at the given element strides.
Status gemm(DType t, const void *a, const void *b, void *c, int64_t M,
            int64_t N, int64_t K, bool transB, int64_t batch = 1,
            int64_t strideA = 0, int64_t strideB = 0, int64_t strideC = 0) {
  cudaDataType type;
  if (!gemmType(t, type))
    return typeError("gemm", t);
  cublasHandle_t h = blasHandle();
  if (!h)
    return Status::error("cublasCreate failed (no usable GPU?)");
  float alpha = 1.0f, beta = 0.0f;
  // Column-major view: C^T[N,M] = op(B)^T[N,K] · A^T[K,M].
  cublasStatus_t s = cublasGemmStridedBatchedEx(
      h, transB ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N),
      static_cast<int>(M), static_cast<int>(K), &alpha, b, type,
      static_cast<int>(transB ? K : N), strideB, a, type, static_cast<int>(K),
      strideA, &beta, c, type, static_cast<int>(N), strideC,
      static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error(std::string("cuBLAS GEMM failed: ") +
                         cublasGetStatusString(s));
  return Status::success();
}


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
      acc = kind == 2 ? fmaxf(acc, v) : kind == 3 ? fminf(acc, v) : acc + v;
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
  MP_FLOAT_TYPES(a.dtype, "binary",
                 binaryKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     static_cast<int>(kind), a.as<T>(), b.as<T>(), out.as<T>(),
                     n, dimsOf(out.shape), broadcastStrides(out.shape, a.shape),
                     broadcastStrides(out.shape, b.shape)));
  return launched("binary");
}

Status compare(cpu::CompareKind kind, const Tensor &a, const Tensor &b,
               Tensor &out) {
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  compareKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
      static_cast<int>(kind), a.data, b.data, a.dtype, out.as<uint8_t>(), n,
      dimsOf(out.shape), broadcastStrides(out.shape, a.shape),
      broadcastStrides(out.shape, b.shape));
  return launched("compare");
}

Status where(const Tensor &cond, const Tensor &a, const Tensor &b,
             Tensor &out) {
  int64_t n = out.numel();
  if (n == 0)
    return Status::success();
  MP_FLOAT_TYPES(a.dtype, "where",
                 whereKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     cond.as<uint8_t>(), a.as<T>(), b.as<T>(), out.as<T>(), n,
                     dimsOf(out.shape), broadcastStrides(out.shape, cond.shape),
                     broadcastStrides(out.shape, a.shape),
                     broadcastStrides(out.shape, b.shape)));
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
  castKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(x.data, x.dtype, out.data, out.dtype,
                                         n);
  return launched("cast");
}

Status linear(const Tensor &x, const Tensor &weight, const Tensor *bias,
              bool transposeWeight, Tensor &out) {
  int64_t k = x.shape.back(), n = out.shape.back();
  int64_t m = k ? x.numel() / k : 0;
  if (Status s = gemm(x.dtype, x.data, weight.data, out.data, m, n, k,
                      transposeWeight);
      !s)
    return s;
  if (!bias || out.numel() == 0)
    return Status::success();
  addBiasKernel<<<blocksFor(out.numel()), kThreads, 0, computeStream()>>>(out.data, out.dtype,
                                                      bias->data, out.numel(), n);
  return launched("linear bias");
}

Status matmul(const Tensor &a, const Tensor &b, Tensor &out) {
  std::vector<int64_t> as = a.shape, bs = b.shape;
  if (as.size() == 1)
    as.insert(as.begin(), 1);
  if (bs.size() == 1)
    bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  int64_t batchA = 1, batchB = 1;
  for (size_t i = 0; i + 2 < as.size(); ++i)
    batchA *= as[i];
  for (size_t i = 0; i + 2 < bs.size(); ++i)
    batchB *= bs[i];
  int64_t batch = std::max(batchA, batchB);
  if (batchB == 1) // a shared right operand: one GEMM over all rows
    return gemm(a.dtype, a.data, b.data, out.data, batchA * M, N, K, false);
  if (batchA == batchB || batchA == 1)
    return gemm(a.dtype, a.data, b.data, out.data, M, N, K, false, batch,
                batchA == 1 ? 0 : M * K, K * N, M * N);
  return Status::error("matmul: this batch broadcast is not supported on "
                       "CUDA yet");
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

Status attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const Tensor *mask, float scale, bool causal, Tensor &out) {
  int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  int64_t Hkv = k.shape[1], Sk = k.shape[2], Dv = v.shape[3];
  std::vector<int64_t> scores = {B, H, Sq, Sk};
  size_t sharedBytes = Sk * sizeof(float);
  if (sharedBytes > 48 * 1024)
    return Status::error("attention: " + std::to_string(Sk) +
                         " keys exceed this kernel's shared memory");
  if (B * H * Sq == 0)
    return Status::success();
  MP_FLOAT_TYPES(
      q.dtype, "attention",
      attentionKernel<<<B * H * Sq, 128, sharedBytes, computeStream()>>>(
          q.as<T>(), k.as<T>(), v.as<T>(), mask ? mask->as<T>() : nullptr,
          dimsOf(scores),
          mask ? broadcastStrides(scores, mask->shape) : Strides(),
          out.as<T>(), H, Hkv, Sq, Sk, D, Dv, scale, causal));
  return launched("attention");
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

Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out) {
  if (out.dtype != DType::F32)
    return typeError("cross_entropy (result)", out.dtype);
  int64_t vocab = logits.shape.back();
  int64_t rows = vocab ? logits.numel() / vocab : 0;
  if (Status s = cudaStatus(cudaMemsetAsync(out.data, 0, sizeof(float),
                                            computeStream()), "memset");
      !s)
    return s;
  if (rows == 0)
    return Status::success();
  MP_FLOAT_TYPES(logits.dtype, "cross_entropy",
                 crossEntropyKernel<<<rows, kThreads, 0, computeStream()>>>(
                     logits.as<T>(), targets.data, targets.dtype == DType::I64,
                     vocab, rows, out.as<float>()));
  return launched("cross_entropy");
}

Status einsum(const std::string &, const std::vector<const Tensor *> &,
              Tensor &) {
  return Status::error("einsum is not supported on CUDA yet; run with "
                       "--device cpu");
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
