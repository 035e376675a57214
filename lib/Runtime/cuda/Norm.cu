//===- Norm.cu - CUDA norms, softmax, reductions, cross-entropy
//-------------===//
//
// One block per row for layer/RMS norm, softmax over the last axis and
// cross-entropy; one thread, or one block for long ones, per reduced output.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace mp::rt::cuda {

namespace {

template <typename T>
__global__ void layerNormKernel(const T *x, const T *scale, const T *bias, T *o,
                                int64_t inner, float eps, bool rms) {
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
      o[base + a * inner] = fromC<T>(
          m == C(-INFINITY) ? C(0) : m_exp(toC(x[base + a * inner]) - m) / sum);
  }
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
    auto element = [&](int64_t r) {
      return toC(in[offsetOf(r, redDims, redSt)]);
    };
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
  auto element = [&](int64_t r) {
    return toC(in[offsetOf(r, redDims, redSt)]);
  };
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
                                   bool t64, int64_t vocab, float *acc) {
  __shared__ float shared[32];
  const T *row = logits + blockIdx.x * vocab;
  float sum;
  float m = rowMaxExpSum(row, vocab, shared, sum);
  if (threadIdx.x == 0) {
    int64_t t = t64 ? static_cast<const int64_t *>(targets)[blockIdx.x]
                    : static_cast<const int32_t *>(targets)[blockIdx.x];
    if (t == cpu::kIgnoreIndex)
      return; // as PyTorch's ignore_index: left out of the mean
    atomicAdd(acc, logf(sum) + m - toC(row[t]));
    atomicAdd(acc + 1, 1.0f);
  }
}

/// The mean of the counted losses (NaN when none was counted, as PyTorch).
template <typename T> __global__ void meanLossKernel(const float *acc, T *out) {
  out[0] = fromC<T>(acc[1] > 0 ? acc[0] / acc[1] : nanf(""));
}

} // namespace

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
  int64_t dim = x.shape.empty() ? 1 : x.shape[axis], inner = 1; // 0-d: one
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t outer = dim * inner ? x.numel() / (dim * inner) : 0;
  if (outer == 0)
    return Status::success();
  MP_REAL_TYPES(x.dtype, "softmax",
                if (inner == 1)
                    softmaxLastKernel<<<outer, kThreads, 0, computeStream()>>>(
                        x.as<T>(), out.as<T>(), dim);
                else softmaxStridedKernel<<<blocksFor(outer * inner), kThreads,
                                            0, computeStream()>>>(
                    x.as<T>(), out.as<T>(), outer, dim, inner));
  return launched("softmax");
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
  default: MP_REAL_TYPES(x.dtype, "reduce", launch(x.as<T>()));
  }
  return launched("reduce");
}

/// The mean loss accumulates in fp32 (in `out` itself when it is fp32, else
/// in a device float, then cast to fp16/bf16).
Status crossEntropy(const Tensor &logits, const Tensor &targets, Tensor &out) {
  if (out.dtype != DType::F32 && out.dtype != DType::F16 &&
      out.dtype != DType::BF16)
    return typeError("cross_entropy (result)", out.dtype);
  // The sum of the counted losses and their count, then their mean.
  if (Status s = kernelScratch().reserve(2 * sizeof(float)); !s)
    return s;
  float *acc = static_cast<float *>(kernelScratch().get());
  int64_t vocab = logits.shape.back();
  int64_t rows = vocab ? logits.numel() / vocab : 0;
  if (Status s = cudaStatus(
          cudaMemsetAsync(acc, 0, 2 * sizeof(float), computeStream()),
          "memset");
      !s)
    return s;
  if (rows > 0) {
    MP_FLOAT_TYPES(logits.dtype, "cross_entropy",
                   crossEntropyKernel<<<rows, kThreads, 0, computeStream()>>>(
                       logits.as<T>(), targets.data,
                       targets.dtype == DType::I64, vocab, acc));
    if (Status s = launched("cross_entropy"); !s)
      return s;
  }
  MP_FLOAT_TYPES(
      out.dtype, "cross_entropy (result)",
      meanLossKernel<<<1, 1, 0, computeStream()>>>(acc, out.as<T>()));
  return launched("cross_entropy (mean)");
}

size_t crossEntropyScratchBytes(const Tensor &) { return 2 * sizeof(float); }

} // namespace mp::rt::cuda
