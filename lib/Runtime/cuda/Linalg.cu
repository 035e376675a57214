//===- Linalg.cu - cuBLAS GEMMs, attention, einsum
//--------------------------===//
//
// Matmul and linear through cublasGemmStridedBatchedEx (fp32 accumulation,
// fp64 for fp64) or an integer GEMM kernel; attention chunk by chunk as two
// GEMMs around a masked softmax (plans in Plans.h); einsum on the host.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

#include <limits>

namespace mp::rt::cuda {

namespace {

/// One block per score row of an attention chunk: hides the keys causality
/// hides, adds the mask, and writes the softmax as probabilities (in place
/// when T is float). Chunk row r is global row rowBase + r of [B*H*Sq, Sk].
template <typename T>
__global__ void
attentionSoftmaxKernel(const float *scores, T *probs, int64_t keys,
                       int64_t queries, int64_t rowBase, bool causal,
                       const T *mask, Dims maskDims, Strides maskStrides) {
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

/// dS = P ∘ (dP − Σ_d dO·O) for one row of an attention-backward chunk (a
/// block per row), in place of dP: the softmax's backward, with the row's
/// Σ_j P·dP taken as Σ_d dO·O (the same sum, read from the result).
__global__ void attentionScoreGradKernel(const float *probs, float *dprobs,
                                         const float *out, const float *dout,
                                         int64_t keys, int64_t valueDim,
                                         int64_t rowBase) {
  __shared__ float shared[32];
  const int64_t row = rowBase + blockIdx.x;
  float dot = 0;
  for (int64_t d = threadIdx.x; d < valueDim; d += blockDim.x)
    dot += dout[row * valueDim + d] * out[row * valueDim + d];
  dot = blockSum(dot, shared);
  const float *p = probs + blockIdx.x * keys;
  float *ds = dprobs + blockIdx.x * keys;
  for (int64_t j = threadIdx.x; j < keys; j += blockDim.x)
    ds[j] = p[j] * (ds[j] - dot);
}

template <typename T>
__global__ void addBiasKernel(T *o, const T *bias, int64_t n, int64_t cols) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t row, col;
    divMod(i, cols, row, col);
    o[i] = fromC<T>(toC(o[i]) + toC(bias[col]));
  }
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

/// cublasGemmStridedBatchedEx, or its 64-bit form where a size does not
/// fit an int (a tall folded GEMM can have more than 2^31 rows).
cublasStatus_t stridedBatchedGemm(cublasHandle_t h, const ColumnMajorGemm &cm,
                                  const void *alpha, const void *first,
                                  const void *second, cudaDataType ab,
                                  const void *beta, void *c, cudaDataType ct,
                                  cublasComputeType_t compute) {
  const cublasOperation_t transFirst =
      cm.transFirst ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transSecond =
      cm.transSecond ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int64_t largest =
      std::max({cm.m, cm.n, cm.k, cm.ldFirst, cm.ldSecond, cm.ldC, cm.batch});
  if (largest <= std::numeric_limits<int>::max())
    return cublasGemmStridedBatchedEx(
        h, transFirst, transSecond, static_cast<int>(cm.m),
        static_cast<int>(cm.n), static_cast<int>(cm.k), alpha, first, ab,
        static_cast<int>(cm.ldFirst), cm.strideFirst, second, ab,
        static_cast<int>(cm.ldSecond), cm.strideSecond, beta, c, ct,
        static_cast<int>(cm.ldC), cm.strideC, static_cast<int>(cm.batch),
        compute, CUBLAS_GEMM_DEFAULT);
  return cublasGemmStridedBatchedEx_64(
      h, transFirst, transSecond, cm.m, cm.n, cm.k, alpha, first, ab,
      cm.ldFirst, cm.strideFirst, second, ab, cm.ldSecond, cm.strideSecond,
      beta, c, ct, cm.ldC, cm.strideC, cm.batch, compute, CUBLAS_GEMM_DEFAULT);
}

} // namespace

Status gemm(const RowMajorGemm &g, DType abType, const void *a, const void *b,
            DType cType, void *c, float alpha) {
  cudaDataType ab, ct;
  if (!gemmType(abType, ab))
    return typeError("gemm", abType);
  if (!gemmType(cType, ct) || (abType == DType::F64) != (cType == DType::F64))
    return typeError("gemm (result)", cType);
  if (g.m * g.n * g.batch == 0)
    return Status::success();
  if (g.k == 0)
    return g.accumulate ? Status::success() : zeroGemmResult(g, c, cType);
  cublasHandle_t h;
  if (Status s = blasHandle(h); !s)
    return s;
  const ColumnMajorGemm cm = columnMajor(g);
  // Alpha and beta have the compute type.
  const bool fp64 = abType == DType::F64;
  const float beta = g.accumulate ? 1.0f : 0.0f;
  const double alpha64 = alpha, beta64 = beta;
  cublasStatus_t s = stridedBatchedGemm(
      h, cm, fp64 ? static_cast<const void *>(&alpha64) : &alpha,
      elementAt(b, cm.offsetFirst, abType),
      elementAt(a, cm.offsetSecond, abType), ab,
      fp64 ? static_cast<const void *>(&beta64) : &beta,
      const_cast<uint8_t *>(elementAt(c, cm.offsetC, cType)), ct,
      fp64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F);
  if (s != CUBLAS_STATUS_SUCCESS)
    return Status::error("cuBLAS GEMM (m " + std::to_string(g.m) + ", n " +
                         std::to_string(g.n) + ", k " + std::to_string(g.k) +
                         ", batch " + std::to_string(g.batch) +
                         ") failed: " + cublasGetStatusString(s));
  return Status::success();
}

namespace {

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
  MP_INTEGER_TYPES(
      a.dtype, "matmul",
      integerGemmKernel<<<blocksFor(total), kThreads, 0, computeStream()>>>(
          g, a.as<T>(), b.as<T>(), c.as<T>()));
  return launched("matmul");
}

AttentionShape attentionShapeOf(const Tensor &q, const Tensor &k,
                                const Tensor &v) {
  return {q.shape[0], q.shape[1], k.shape[1], q.shape[2],
          k.shape[2], q.shape[3], v.shape[3]};
}

/// How a mask broadcast to the scores [B, H, Sq, Sk] is indexed.
struct MaskLayout {
  Dims dims;
  Strides strides;
};
MaskLayout maskLayoutOf(const AttentionShape &shape, const Tensor *mask) {
  const std::vector<int64_t> full = {shape.batch, shape.heads, shape.queries,
                                     shape.keys};
  MaskLayout m{dimsOf(full),
               mask ? broadcastStrides(full, mask->shape) : Strides()};
  coalesce(m.dims, {&m.strides});
  return m;
}

int64_t bytesPerScoreOf(DType t) {
  return attentionBytesPerScore(dtypeSize(t), t == DType::F32);
}

} // namespace

Status blasHandle(cublasHandle_t &out) {
  static cublasHandle_t handle = nullptr;
  static const Status created = [] {
    if (cublasStatus_t s = cublasCreate(&handle); s != CUBLAS_STATUS_SUCCESS) {
      handle = nullptr;
      return Status::error(std::string("cublasCreate: ") +
                           cublasGetStatusString(s));
    }
    if (cublasStatus_t s = cublasSetStream(handle, computeStream());
        s != CUBLAS_STATUS_SUCCESS)
      return Status::error(std::string("cublasSetStream: ") +
                           cublasGetStatusString(s));
    return Status::success();
  }();
  out = handle;
  return created;
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
  if (Status s = gemm(g, x.dtype, x.data, weight.data, out.dtype, out.data); !s)
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
  const bool integer =
      a.dtype == DType::I64 || a.dtype == DType::I32 || a.dtype == DType::I8;
  for (const RowMajorGemm &g : plan)
    if (Status s = integer
                       ? integerGemm(g, a, b, out)
                       : gemm(g, a.dtype, a.data, b.data, out.dtype, out.data);
        !s)
      return s;
  return Status::success();
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
  if (!shape.groupsEvenly())
    return Status::error("attention: query heads do not group into the "
                         "key/value heads");
  if (out.numel() == 0)
    return Status::success();
  if (shape.keys == 0) // no key to attend to: zeros, as on the CPU
    return cudaStatus(
        cudaMemsetAsync(out.data, 0, out.bytes(), computeStream()),
        "attention");
  const DType t = q.dtype;
  const bool separateProbs = t != DType::F32;
  const int64_t bytesPerScore = bytesPerScoreOf(t);
  const MaskLayout m = maskLayoutOf(shape, mask);
  for (const AttentionChunk &c :
       attentionChunks(shape, bytesPerScore, kAttentionScratchBudget)) {
    const int64_t rows = c.pairs * c.rows;
    if (Status s = kernelScratch().reserve(rows * shape.keys * bytesPerScore);
        !s)
      return s;
    void *scratch = kernelScratch().get();
    float *scores = static_cast<float *>(scratch);
    void *probs = separateProbs
                      ? static_cast<void *>(scores + rows * shape.keys)
                      : scratch;
    if (Status s = gemm(attentionScoresGemm(shape, c), t, q.data, k.data,
                        DType::F32, scores, scale);
        !s)
      return s;
    MP_FLOAT_TYPES(
        t, "attention",
        attentionSoftmaxKernel<<<rows, kThreads, 0, computeStream()>>>(
            scores, static_cast<T *>(probs), shape.keys, shape.queries,
            c.rowBase(shape), causal, mask ? mask->as<T>() : nullptr, m.dims,
            m.strides));
    if (Status s = launched("attention softmax"); !s)
      return s;
    if (Status s =
            gemm(attentionValuesGemm(shape, c), t, probs, v.data, t, out.data);
        !s)
      return s;
  }
  return Status::success();
}

size_t attentionScratchBytes(const Tensor &q, const Tensor &k,
                             const Tensor &v) {
  const AttentionShape shape = attentionShapeOf(q, k, v);
  if (!shape.groupsEvenly() || !isFloatType(q.dtype))
    return 0; // attention() rejects it
  return static_cast<size_t>(attentionScratchBytes(
      shape, bytesPerScoreOf(q.dtype), kAttentionScratchBudget));
}

Status linearWeightGrad(const Tensor &x, const Tensor &dy, bool transposeWeight,
                        Tensor &dw) {
  if (Status s = sameTypes("linear_weight_grad", {&x, &dy, &dw}); !s)
    return s;
  const int64_t k = x.shape.back(), n = dy.shape.back();
  const int64_t rows = k ? x.numel() / k : 0;
  const RowMajorGemm g = linearWeightGradGemm(rows, k, n, transposeWeight);
  return transposeWeight ? gemm(g, x.dtype, dy.data, x.data, dw.dtype, dw.data)
                         : gemm(g, x.dtype, x.data, dy.data, dw.dtype, dw.data);
}

/// Attention's backward chunk by chunk (the forward's chunks, with P and dP
/// in the scratch): the probabilities are recomputed as the forward makes
/// them, then the GEMMs of attentionGradGemms around the softmax's
/// backward. fp32, as the CPU kernel.
Status attentionGrad(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor *mask, const Tensor &out, const Tensor &dout,
                     float scale, bool causal, Tensor &dq, Tensor &dk,
                     Tensor &dv) {
  if (Status s = sameTypes("attention_grad",
                           {&q, &k, &v, mask, &out, &dout, &dq, &dk, &dv});
      !s)
    return s;
  if (q.dtype != DType::F32)
    return typeError("attention_grad", q.dtype);
  const AttentionShape shape = attentionShapeOf(q, k, v);
  if (!shape.groupsEvenly())
    return Status::error("attention_grad: query heads do not group into the "
                         "key/value heads");
  for (Tensor *t : {&dq, &dk, &dv})
    if (Status s =
            cudaStatus(cudaMemsetAsync(t->data, 0, t->bytes(), computeStream()),
                       "attention_grad");
        !s)
      return s;
  if (shape.batch * shape.heads * shape.queries == 0 || shape.keys == 0)
    return Status::success();
  const MaskLayout m = maskLayoutOf(shape, mask);
  for (const AttentionChunk &c : attentionChunks(
           shape, kAttentionGradBytesPerScore, kAttentionScratchBudget)) {
    const int64_t rows = c.pairs * c.rows;
    if (Status s = kernelScratch().reserve(rows * shape.keys *
                                           kAttentionGradBytesPerScore);
        !s)
      return s;
    float *probs = static_cast<float *>(kernelScratch().get());
    float *dprobs = probs + rows * shape.keys;
    if (Status s = gemm(attentionScoresGemm(shape, c), DType::F32, q.data,
                        k.data, DType::F32, probs, scale);
        !s)
      return s;
    attentionSoftmaxKernel<<<rows, kThreads, 0, computeStream()>>>(
        probs, probs, shape.keys, shape.queries, c.rowBase(shape), causal,
        mask ? mask->as<float>() : nullptr, m.dims, m.strides);
    if (Status s = launched("attention_grad softmax"); !s)
      return s;
    const AttentionGradGemms g = attentionGradGemms(shape, c);
    if (Status s = gemm(g.valueGrad, DType::F32, probs, dout.data, DType::F32,
                        dv.data);
        !s)
      return s;
    if (Status s = gemm(g.probabilityGrad, DType::F32, dout.data, v.data,
                        DType::F32, dprobs);
        !s)
      return s;
    attentionScoreGradKernel<<<rows, kThreads, 0, computeStream()>>>(
        probs, dprobs, out.as<float>(), dout.as<float>(), shape.keys,
        shape.valueDim, c.rowBase(shape));
    if (Status s = launched("attention_grad scores"); !s)
      return s;
    if (Status s = gemm(g.queryGrad, DType::F32, dprobs, k.data, DType::F32,
                        dq.data, scale);
        !s)
      return s;
    if (Status s = gemm(g.keyGrad, DType::F32, dprobs, q.data, DType::F32,
                        dk.data, scale);
        !s)
      return s;
  }
  return Status::success();
}

size_t attentionGradScratchBytes(const Tensor &q, const Tensor &k,
                                 const Tensor &v) {
  const AttentionShape shape = attentionShapeOf(q, k, v);
  if (!shape.groupsEvenly())
    return 0; // attentionGrad() rejects it
  return static_cast<size_t>(attentionScratchBytes(
      shape, kAttentionGradBytesPerScore, kAttentionScratchBudget));
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
    if (Status s =
            copyToHost(bytes[i].data(), inputs[i]->data, inputs[i]->bytes());
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

} // namespace mp::rt::cuda
