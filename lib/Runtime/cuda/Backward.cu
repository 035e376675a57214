//===- Backward.cu - CUDA kernels of the gradient ops ---------------------===//
//
// The backward of a train step, beside Linalg.cu's GEMM-based gradients
// (linear weight, attention) and Shape.cu's slice gradient: norms, GELU,
// embedding, cross-entropy and its vocab-parallel pieces, and dropout. As
// on the CPU, results do not depend on scheduling: sums over rows go
// through fixed chunks added in order, and nothing uses atomics. Dropout
// draws the CPU's mask (mp/Support/DropoutMask.h).
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"
#include "mp/Support/DropoutMask.h"

#include <limits>
#include <string>

namespace mp::rt::cuda {

namespace {

/// Rows per partial sum of a norm's scale gradient.
constexpr int64_t kNormGradRows = 256;
/// The most chunks of rows one launch spreads over gridDim.y.
constexpr int64_t kMaxGridY = 65535;

int64_t normGradChunks(int64_t rows) {
  return (rows + kNormGradRows - 1) / kNormGradRows;
}

__device__ __forceinline__ int64_t indexAt(const void *ids, bool ids64,
                                           int64_t i) {
  return ids64 ? static_cast<const int64_t *>(ids)[i]
               : static_cast<const int32_t *>(ids)[i];
}

/// dx of layer norm (or, when `rms`, RMS norm) over rows of n, a block per
/// row: dx = rstd · (g − mean(g) − x̂ · mean(g · x̂)), g = dy · scale (RMS:
/// no mean(g), x̂ = x · rstd). The row's mean and rstd go to stats[2 row]
/// and stats[2 row + 1] for the scale gradient.
template <typename T>
__global__ void normGradInputKernel(const T *x, const T *scale, const T *dy,
                                    T *dx, float *stats, int64_t n, float eps,
                                    bool rms) {
  __shared__ float shared[32];
  const T *xr = x + blockIdx.x * n, *gr = dy + blockIdx.x * n;
  T *dxr = dx + blockIdx.x * n;
  float mean = 0;
  if (!rms) {
    float sum = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
      sum += toC(xr[j]);
    mean = blockSum(sum, shared) / n;
  }
  float squares = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float c = toC(xr[j]) - mean;
    squares += c * c;
  }
  const float rstd = rsqrtf(blockSum(squares, shared) / n + eps);
  float sumG = 0, sumGX = 0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float xhat = (toC(xr[j]) - mean) * rstd;
    const float g = toC(gr[j]) * toC(scale[j]);
    sumG += g;
    sumGX += g * xhat;
  }
  const float meanG = rms ? 0.0f : blockSum(sumG, shared) / n;
  const float meanGX = blockSum(sumGX, shared) / n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float xhat = (toC(xr[j]) - mean) * rstd;
    const float g = toC(gr[j]) * toC(scale[j]);
    dxr[j] = fromC<T>(rstd * (g - meanG - xhat * meanGX));
  }
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = mean;
    stats[2 * blockIdx.x + 1] = rstd;
  }
}

/// partial[chunk][j] = Σ dy · x̂ over the chunk's kNormGradRows rows, a
/// thread per column j (rows read coalesced), chunks over gridDim.y.
template <typename T>
__global__ void normGradScalePartialKernel(const T *x, const T *dy,
                                           const float *stats, float *partial,
                                           int64_t rows, int64_t n,
                                           int64_t chunks) {
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n)
    return;
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t end = min(rows, (chunk + 1) * kNormGradRows);
    float acc = 0;
    for (int64_t r = chunk * kNormGradRows; r < end; ++r)
      acc += toC(dy[r * n + j]) * (toC(x[r * n + j]) - stats[2 * r]) *
             stats[2 * r + 1];
    partial[chunk * n + j] = acc;
  }
}

/// dscale[j] = the chunks' partial sums of column j, in chunk order.
template <typename T>
__global__ void normGradScaleSumKernel(const float *partial, T *dscale,
                                       int64_t chunks, int64_t n) {
  const int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (j >= n)
    return;
  float sum = 0;
  for (int64_t c = 0; c < chunks; ++c)
    sum += partial[c * n + j];
  dscale[j] = fromC<T>(sum);
}

/// dy · gelu'(x), the CPU's formulas (FastMath.h) with CUDA's functions;
/// x is clamped where the second term vanishes (NaN passes).
template <typename T>
__global__ void geluGradKernel(const T *x, const T *dy, T *dx, int64_t n,
                               bool tanhForm) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    const float v = toC(x[i]);
    float d;
    if (tanhForm) {
      const float c = 0.79788456080286536f, k = 0.044715f;
      const float xc = v > 10.0f ? 10.0f : v < -10.0f ? -10.0f : v;
      const float t = tanhf(c * (xc + k * xc * xc * xc));
      d = 0.5f * (1.0f + t) +
          0.5f * xc * (1.0f - t * t) * c * (1.0f + 3.0f * k * xc * xc);
    } else {
      const float xc = v > 15.0f ? 15.0f : v < -15.0f ? -15.0f : v;
      d = normcdff(v) + xc * expf(-0.5f * xc * xc) * 0.39894228040143268f;
    }
    dx[i] = fromC<T>(toC(dy[i]) * d);
  }
}

/// The table gradient (zeroed first), a thread per column and slice of
/// the table's rows (gridDim.y slices): each row sums its positions in
/// order, as on the CPU, without atomics. Ids outside [offset, offset +
/// rows) of the `vocab`-row table (negative ids from its end) add nothing.
template <typename T>
__global__ void embeddingGradKernel(const void *ids, bool ids64, const T *dy,
                                    T *table, int64_t positions, int64_t rows,
                                    int64_t h, int64_t offset, int64_t vocab) {
  const int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t perSlice = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t first = blockIdx.y * perSlice;
  const int64_t last = min(rows, first + perSlice);
  if (c >= h)
    return;
  for (int64_t p = 0; p < positions; ++p) {
    int64_t id = indexAt(ids, ids64, p);
    if (id < 0)
      id += vocab;
    const int64_t local = id - offset;
    if (local < first || local >= last)
      continue;
    table[local * h + c] =
        fromC<T>(toC(table[local * h + c]) + toC(dy[p * h + c]));
  }
}

/// The number of targets that are not kIgnoreIndex (one block).
__global__ void countTargetsKernel(const void *targets, bool t64,
                                   int64_t positions, long long *count) {
  __shared__ long long shared[32];
  long long c = 0;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x)
    c += indexAt(targets, t64, p) != cpu::kIgnoreIndex;
  c = blockSum(c, shared);
  if (threadIdx.x == 0)
    *count = c;
}

/// dlogits of the mean cross-entropy, a block per position: weight ·
/// (softmax − onehot(target)), weight = dloss / count. The softmax is the
/// row's own, or, given `logsumexp` (vocab-parallel: the row is this
/// rank's slice from `offset`), exp(x − logsumexp). Ignored rows are zeros.
template <typename T>
__global__ void crossEntropyGradKernel(const T *logits, const void *targets,
                                       bool t64, const float *logsumexp,
                                       const T *dloss, const long long *count,
                                       T *dlogits, int64_t vocab,
                                       int64_t offset) {
  __shared__ float shared[32];
  const T *row = logits + blockIdx.x * vocab;
  T *out = dlogits + blockIdx.x * vocab;
  const int64_t t = indexAt(targets, t64, blockIdx.x);
  if (t == cpu::kIgnoreIndex) {
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
      out[j] = fromC<T>(0.0f);
    return;
  }
  const float weight = *count ? toC(dloss[0]) / float(*count) : 0.0f;
  float m, sum = 1;
  if (logsumexp)
    m = logsumexp[blockIdx.x];
  else
    m = rowMaxExpSum(row, vocab, shared, sum);
  const int64_t local = t - offset;
  for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x)
    out[j] = fromC<T>(expf(toC(row[j]) - m) / sum * weight -
                      (j == local ? weight : 0.0f));
}

/// Per position of this rank's vocabulary slice: the row max, Σ exp(x −
/// max), and the target's logit when the slice holds it (else 0).
template <typename T>
__global__ void vocabStatsKernel(const T *logits, const void *targets, bool t64,
                                 int64_t vocab, int64_t offset, float *stats) {
  __shared__ float shared[32];
  const T *row = logits + blockIdx.x * vocab;
  float sum;
  const float m = rowMaxExpSum(row, vocab, shared, sum);
  if (threadIdx.x == 0) {
    const int64_t local = indexAt(targets, t64, blockIdx.x) - offset;
    stats[3 * blockIdx.x] = m;
    stats[3 * blockIdx.x + 1] = sum;
    stats[3 * blockIdx.x + 2] =
        local >= 0 && local < vocab ? toC(row[local]) : 0.0f;
  }
}

/// From every rank's statistics [ranks, positions, 3]: each position's
/// log-sum-exp over the whole vocabulary, and the mean loss over the
/// targets that are not ignored (one block; sums in double, as the CPU).
__global__ void vocabLossKernel(const float *stats, const void *targets,
                                bool t64, int64_t ranks, int64_t positions,
                                float *loss, float *logsumexp) {
  __shared__ double sharedSum[32];
  __shared__ long long sharedCount[32];
  double sum = 0;
  long long counted = 0;
  for (int64_t p = threadIdx.x; p < positions; p += blockDim.x) {
    double m = -INFINITY, target = 0, total = 0;
    for (int64_t r = 0; r < ranks; ++r)
      m = fmax(m, double(stats[(r * positions + p) * 3]));
    for (int64_t r = 0; r < ranks; ++r) {
      const float *rs = stats + (r * positions + p) * 3;
      total += double(rs[1]) * exp(double(rs[0]) - m);
      target += rs[2];
    }
    const double l = m + log(total);
    logsumexp[p] = static_cast<float>(l);
    if (indexAt(targets, t64, p) == cpu::kIgnoreIndex)
      continue;
    sum += l - target;
    ++counted;
  }
  sum = blockSum(sum, sharedSum);
  counted = blockSum(counted, sharedCount);
  if (threadIdx.x == 0)
    loss[0] = counted ? static_cast<float>(sum / double(counted)) : nanf("");
}

template <typename T>
__global__ void dropoutKernel(const T *x, T *out, int64_t n, Compute<T> scale,
                              uint64_t key, uint64_t threshold) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[i] = mp::dropout::keep(key, static_cast<uint64_t>(i), threshold)
                 ? fromC<T>(toC(x[i]) * scale)
                 : fromC<T>(Compute<T>(0));
}

/// Rows and row length of a norm over the dims from `axis`.
void normRows(const Tensor &x, int64_t axis, int64_t &rows, int64_t &n) {
  n = 1;
  for (size_t d = static_cast<size_t>(axis); d < x.shape.size(); ++d)
    n *= x.shape[d];
  rows = n ? x.numel() / n : 0;
}

Status normGrad(const char *kernel, const Tensor &x, const Tensor &scale,
                const Tensor &dy, int64_t axis, float epsilon, bool rms,
                Tensor &dx, Tensor &dscale) {
  if (Status s = sameTypes(kernel, {&x, &scale, &dy, &dx, &dscale}); !s)
    return s;
  int64_t rows, n;
  normRows(x, axis, rows, n);
  if (n == 0)
    return Status::success();
  if (rows == 0)
    return cudaStatus(
        cudaMemsetAsync(dscale.data, 0, dscale.bytes(), computeStream()),
        kernel);
  const int64_t chunks = normGradChunks(rows);
  if (Status s = kernelScratch().reserve(normGradScratchBytes(x, axis)); !s)
    return s;
  float *stats = static_cast<float *>(kernelScratch().get());
  float *partial = stats + 2 * rows;
  const dim3 columns(static_cast<unsigned>(blocksFor(n)),
                     static_cast<unsigned>(std::min(chunks, kMaxGridY)));
  MP_FLOAT_TYPES(
      x.dtype, kernel,
      normGradInputKernel<<<rows, kThreads, 0, computeStream()>>>(
          x.as<T>(), scale.as<T>(), dy.as<T>(), dx.as<T>(), stats, n, epsilon,
          rms);
      normGradScalePartialKernel<<<columns, kThreads, 0, computeStream()>>>(
          x.as<T>(), dy.as<T>(), stats, partial, rows, n, chunks);
      normGradScaleSumKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
          partial, dscale.as<T>(), chunks, n));
  return launched(kernel);
}

static_assert(sizeof(long long) <= 2 * sizeof(float),
              "the target count fits the scratch crossEntropyScratchBytes "
              "sizes (the binder reserves that for the gradients too)");

/// The count of counted targets, in the kernel scratch (crossEntropy's).
Status countTargets(const Tensor &targets, long long *&count) {
  if (Status s = kernelScratch().reserve(sizeof(long long)); !s)
    return s;
  count = static_cast<long long *>(kernelScratch().get());
  countTargetsKernel<<<1, kThreads, 0, computeStream()>>>(
      targets.data, targets.dtype == DType::I64, targets.numel(), count);
  return launched("cross_entropy_grad (count)");
}

/// Targets are i32 or i64 (as the CPU kernels require), one block per
/// position (a grid's x dimension holds 2^31 - 1).
Status checkTargets(const char *kernel, const Tensor &targets) {
  if (targets.dtype != DType::I64 && targets.dtype != DType::I32)
    return typeError(kernel, targets.dtype);
  if (targets.numel() > std::numeric_limits<int32_t>::max())
    return Status::error(std::string(kernel) + ": " +
                         std::to_string(targets.numel()) +
                         " positions exceed one launch (2^31 - 1)");
  return Status::success();
}

Status crossEntropyGradOf(const char *kernel, const Tensor &logits,
                          const Tensor &targets, const float *logsumexp,
                          const Tensor &dloss, int64_t offset,
                          Tensor &dlogits) {
  if (Status s = sameTypes(kernel, {&logits, &dloss, &dlogits}); !s)
    return s;
  if (Status s = checkTargets(kernel, targets); !s)
    return s;
  const int64_t vocab = logits.shape.empty() ? 1 : logits.shape.back();
  const int64_t positions = targets.numel();
  if (positions == 0 || vocab == 0)
    return Status::success();
  long long *count = nullptr;
  if (Status s = countTargets(targets, count); !s)
    return s;
  MP_FLOAT_TYPES(
      logits.dtype, kernel,
      crossEntropyGradKernel<<<positions, kThreads, 0, computeStream()>>>(
          logits.as<T>(), targets.data, targets.dtype == DType::I64, logsumexp,
          dloss.as<T>(), count, dlogits.as<T>(), vocab, offset));
  return launched(kernel);
}

} // namespace

size_t normGradScratchBytes(const Tensor &x, int64_t axis) {
  int64_t rows, n;
  normRows(x, axis, rows, n);
  return static_cast<size_t>(2 * rows + normGradChunks(rows) * n) *
         sizeof(float);
}

Status layerNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                     int64_t axis, float epsilon, Tensor &dx, Tensor &dscale) {
  return normGrad("layer_norm_grad", x, scale, dy, axis, epsilon,
                  /*rms=*/false, dx, dscale);
}

Status rmsNormGrad(const Tensor &x, const Tensor &scale, const Tensor &dy,
                   float epsilon, Tensor &dx, Tensor &dscale) {
  const int64_t axis = x.shape.empty() ? 0 : x.shape.size() - 1;
  return normGrad("rms_norm_grad", x, scale, dy, axis, epsilon, /*rms=*/true,
                  dx, dscale);
}

Status geluGrad(const Tensor &x, const Tensor &dy, bool tanhForm, Tensor &dx) {
  if (Status s = sameTypes("gelu_grad", {&x, &dy, &dx}); !s)
    return s;
  const int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  MP_FLOAT_TYPES(x.dtype, "gelu_grad",
                 geluGradKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
                     x.as<T>(), dy.as<T>(), dx.as<T>(), n, tanhForm));
  return launched("gelu_grad");
}

Status embeddingGrad(const Tensor &ids, const Tensor &dy, int64_t offset,
                     int64_t vocab, Tensor &dtable) {
  if (Status s = sameTypes("embedding_grad", {&dy, &dtable}); !s)
    return s;
  if (ids.dtype != DType::I64 && ids.dtype != DType::I32)
    return typeError("embedding_grad (indices)", ids.dtype);
  if (Status s = cudaStatus(
          cudaMemsetAsync(dtable.data, 0, dtable.bytes(), computeStream()),
          "embedding_grad");
      !s)
    return s;
  const int64_t rows = dtable.shape[0], h = dtable.shape[1];
  if (rows * h * ids.numel() == 0)
    return Status::success();
  // Slices of the table's rows multiply the threads (a table has few
  // columns); each thread still reads every id.
  const dim3 grid(static_cast<unsigned>(blocksFor(h)),
                  static_cast<unsigned>(std::min<int64_t>(rows, 256)));
  MP_FLOAT_TYPES(dy.dtype, "embedding_grad",
                 embeddingGradKernel<<<grid, kThreads, 0, computeStream()>>>(
                     ids.data, ids.dtype == DType::I64, dy.as<T>(),
                     dtable.as<T>(), ids.numel(), rows, h, offset, vocab));
  return launched("embedding_grad");
}

Status crossEntropyGrad(const Tensor &logits, const Tensor &targets,
                        const Tensor &dloss, Tensor &dlogits) {
  return crossEntropyGradOf("cross_entropy_grad", logits, targets, nullptr,
                            dloss, 0, dlogits);
}

Status vocabParallelStats(const Tensor &logits, const Tensor &targets,
                          int64_t offset, Tensor &stats) {
  if (stats.dtype != DType::F32)
    return typeError("vocab_parallel_cross_entropy (statistics)", stats.dtype);
  if (Status s = checkTargets("vocab_parallel_cross_entropy", targets); !s)
    return s;
  const int64_t vocab = logits.shape.back(), positions = targets.numel();
  if (positions == 0)
    return Status::success();
  MP_FLOAT_TYPES(logits.dtype, "vocab_parallel_cross_entropy",
                 vocabStatsKernel<<<positions, kThreads, 0, computeStream()>>>(
                     logits.as<T>(), targets.data, targets.dtype == DType::I64,
                     vocab, offset, stats.as<float>()));
  return launched("vocab_parallel_cross_entropy");
}

Status vocabParallelLoss(const Tensor &stats, const Tensor &targets,
                         Tensor &loss, Tensor &logsumexp) {
  for (const Tensor *t :
       std::initializer_list<const Tensor *>{&stats, &loss, &logsumexp})
    if (t->dtype != DType::F32)
      return typeError("vocab_parallel_cross_entropy (loss)", t->dtype);
  if (Status s = checkTargets("vocab_parallel_cross_entropy (loss)", targets);
      !s)
    return s;
  vocabLossKernel<<<1, kThreads, 0, computeStream()>>>(
      stats.as<float>(), targets.data, targets.dtype == DType::I64,
      stats.shape[0], targets.numel(), loss.as<float>(), logsumexp.as<float>());
  return launched("vocab_parallel_cross_entropy (loss)");
}

Status vocabParallelCrossEntropyGrad(const Tensor &logits,
                                     const Tensor &targets,
                                     const Tensor &logsumexp,
                                     const Tensor &dloss, int64_t offset,
                                     Tensor &dlogits) {
  if (logsumexp.dtype != DType::F32)
    return typeError("vocab_parallel_cross_entropy_grad (logsumexp)",
                     logsumexp.dtype);
  return crossEntropyGradOf("vocab_parallel_cross_entropy_grad", logits,
                            targets, logsumexp.as<float>(), dloss, offset,
                            dlogits);
}

Status dropout(const Tensor &x, float ratio, uint64_t key, Tensor &out) {
  if (Status s = sameTypes("dropout", {&x, &out}); !s)
    return s;
  const int64_t n = x.numel();
  if (n == 0)
    return Status::success();
  const uint64_t threshold = mp::dropout::threshold(ratio);
  MP_REAL_TYPES(
      x.dtype, "dropout", using C = Compute<T>;
      dropoutKernel<<<blocksFor(n), kThreads, 0, computeStream()>>>(
          x.as<T>(), out.as<T>(), n, C(1) / (C(1) - C(ratio)), key, threshold));
  return launched("dropout");
}

} // namespace mp::rt::cuda
