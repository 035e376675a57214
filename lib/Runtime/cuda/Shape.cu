//===- Shape.cu - CUDA kernels that move elements
//---------------------------===//
//
// Transpose, expand, slice, concat, split, gather and the vocab-parallel
// embedding: elements (or bytes) moved between strided views.
//
//===----------------------------------------------------------------------===//
#include "Common.cuh"

namespace mp::rt::cuda {

namespace {

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
  case 1:
    moveElements<<<grid, kThreads, 0, computeStream()>>>(
        in.as<uint8_t>(), static_cast<uint8_t *>(out), n, dims, inSt, inBase,
        outSt, outBase);
    break;
  case 2:
    moveElements<<<grid, kThreads, 0, computeStream()>>>(
        in.as<uint16_t>(), static_cast<uint16_t *>(out), n, dims, inSt, inBase,
        outSt, outBase);
    break;
  case 4:
    moveElements<<<grid, kThreads, 0, computeStream()>>>(
        in.as<uint32_t>(), static_cast<uint32_t *>(out), n, dims, inSt, inBase,
        outSt, outBase);
    break;
  case 8:
    moveElements<<<grid, kThreads, 0, computeStream()>>>(
        in.as<uint64_t>(), static_cast<uint64_t *>(out), n, dims, inSt, inBase,
        outSt, outBase);
    break;
  default: return typeError(kernel, in.dtype);
  }
  return launched(kernel);
}

Status gatherBytes(const Tensor &x, Tensor &out, const Strides &st,
                   const char *kernel) {
  return moveBytes(x, out.data, out.shape, st, 0, contiguous(out.shape), 0,
                   kernel);
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

__global__ void vocabEmbeddingKernel(const uint8_t *table, const void *ids,
                                     bool ids64, uint8_t *out, int64_t count,
                                     int64_t rows, int64_t rowBytes,
                                     int64_t offset, int64_t vocab) {
  int64_t total = count * rowBytes;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    int64_t k = t / rowBytes, byte = t % rowBytes;
    int64_t id = ids64 ? static_cast<const int64_t *>(ids)[k]
                       : static_cast<const int32_t *>(ids)[k];
    int64_t local = (id < 0 ? id + vocab : id) - offset;
    out[t] = local >= 0 && local < rows ? table[local * rowBytes + byte] : 0;
  }
}

} // namespace

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
    if (Status s = moveBytes(x, t->data, t->shape, inSt, offset * inSt.s[axis],
                             contiguous(t->shape), 0, "split");
        !s)
      return s;
    offset += t->shape[axis];
  }
  return Status::success();
}

Status vocabEmbedding(const Tensor &table, const Tensor &ids, int64_t offset,
                      int64_t vocab, Tensor &out) {
  int64_t rows = table.shape[0];
  int64_t rowBytes = rows ? static_cast<int64_t>(table.bytes()) / rows : 0;
  int64_t total = ids.numel() * rowBytes;
  if (total == 0)
    return Status::success();
  vocabEmbeddingKernel<<<blocksFor(total), kThreads, 0, computeStream()>>>(
      table.as<uint8_t>(), ids.data, ids.dtype == DType::I64, out.as<uint8_t>(),
      ids.numel(), rows, rowBytes, offset, vocab);
  return launched("vocab-parallel embedding");
}

} // namespace mp::rt::cuda
