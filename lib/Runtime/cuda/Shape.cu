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

/// out[outBase + offsetOf(i, dims, outSt)] = in[inBase + offsetOf(i, dims,
/// inSt)] for every index i of `dims`, in words of type W.
template <typename W>
__global__ void moveWords(const W *in, W *out, int64_t n, Dims dims,
                          Strides inSt, int64_t inBase, Strides outSt,
                          int64_t outBase) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    out[outBase + offsetOf(i, dims, outSt)] =
        in[inBase + offsetOf(i, dims, inSt)];
}

/// Runs `launch(W{})` with W the unsigned type of `wordBytes` bytes (uint4
/// for 16); false for another size.
template <typename Launch> bool withWord(int wordBytes, Launch launch) {
  switch (wordBytes) {
  case 1: launch(uint8_t{}); return true;
  case 2: launch(uint16_t{}); return true;
  case 4: launch(uint32_t{}); return true;
  case 8: launch(uint64_t{}); return true;
  case 16: launch(uint4{}); return true;
  default: return false;
  }
}

/// Moves the elements of an index space `shape` between two strided views
/// (strides and bases in elements), in the widest words planMove allows.
Status moveBytes(const Tensor &in, void *out, const std::vector<int64_t> &shape,
                 Strides inSt, int64_t inBase, Strides outSt, int64_t outBase,
                 const char *kernel) {
  MovePlan plan = planMove(
      shape, inSt, inBase, outSt, outBase, dtypeSize(in.dtype),
      reinterpret_cast<uintptr_t>(in.data), reinterpret_cast<uintptr_t>(out));
  int64_t n = 1;
  for (int d = 0; d < plan.dims.rank; ++d)
    n *= plan.dims.size[d];
  if (n == 0)
    return Status::success();
  bool launchedAny = withWord(plan.wordBytes, [&](auto word) {
    using W = decltype(word);
    moveWords<<<blocksFor(n), kThreads, 0, computeStream()>>>(
        static_cast<const W *>(in.data), static_cast<W *>(out), n, plan.dims,
        plan.in, plan.inBase, plan.out, plan.outBase);
  });
  if (!launchedAny)
    return typeError(kernel, in.dtype);
  return launched(kernel);
}

Status gatherBytes(const Tensor &x, Tensor &out, const Strides &st,
                   const char *kernel) {
  return moveBytes(x, out.data, out.shape, st, 0, contiguous(out.shape), 0,
                   kernel);
}

/// A row of `rowWords` words per block (grid-stride over the rows): the
/// row index is divided once per row, not once per byte.
template <typename W>
__global__ void gatherRowsKernel(const W *x, const void *idx, bool idx64,
                                 W *out, int64_t outer, int64_t count,
                                 int64_t dim, int64_t rowWords) {
  for (int64_t row = blockIdx.x; row < outer * count; row += gridDim.x) {
    int64_t o = row / count, k = row % count;
    int64_t j = idx64 ? static_cast<const int64_t *>(idx)[k]
                      : static_cast<const int32_t *>(idx)[k];
    if (j < 0)
      j += dim;
    const W *src = x + (o * dim + j) * rowWords;
    W *dst = out + row * rowWords;
    for (int64_t w = threadIdx.x; w < rowWords; w += blockDim.x)
      dst[w] = src[w];
  }
}

/// One table row per output row; zeros for ids outside this rank's rows.
template <typename W>
__global__ void vocabEmbeddingKernel(const W *table, const void *ids,
                                     bool ids64, W *out, int64_t count,
                                     int64_t rows, int64_t rowWords,
                                     int64_t offset, int64_t vocab) {
  for (int64_t k = blockIdx.x; k < count; k += gridDim.x) {
    int64_t id = ids64 ? static_cast<const int64_t *>(ids)[k]
                       : static_cast<const int32_t *>(ids)[k];
    int64_t local = (id < 0 ? id + vocab : id) - offset;
    bool inside = local >= 0 && local < rows;
    const W *src = table + (inside ? local : 0) * rowWords;
    W *dst = out + k * rowWords;
    for (int64_t w = threadIdx.x; w < rowWords; w += blockDim.x)
      dst[w] = inside ? src[w] : W{};
  }
}

/// Blocks for `rows` rows, one row per block up to the grid limit.
int rowBlocks(int64_t rows) {
  return static_cast<int>(std::min<int64_t>(rows, 65535LL * 16));
}

} // namespace

Status gather(const Tensor &x, const Tensor &indices, int64_t axis,
              Tensor &out) {
  int64_t outer = 1, inner = dtypeSize(x.dtype);
  for (int64_t d = 0; d < axis; ++d)
    outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d)
    inner *= x.shape[d];
  int64_t count = indices.numel();
  if (outer * count * inner == 0)
    return Status::success();
  int word = wordBytesFor(inner, {reinterpret_cast<uintptr_t>(x.data),
                                  reinterpret_cast<uintptr_t>(out.data)});
  withWord(word, [&](auto w) {
    using W = decltype(w);
    gatherRowsKernel<<<rowBlocks(outer * count), kThreads, 0,
                       computeStream()>>>(
        static_cast<const W *>(x.data), indices.data,
        indices.dtype == DType::I64, static_cast<W *>(out.data), outer, count,
        x.shape[axis], inner / word);
  });
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

/// slice's inverse: dx zeroed, then dy's elements moved to where slice
/// read them.
Status sliceGrad(const Tensor &dy, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &strides, Tensor &dx) {
  if (dy.dtype != dx.dtype)
    return Status::error("slice_grad: element types differ");
  if (Status s =
          cudaStatus(cudaMemsetAsync(dx.data, 0, dx.bytes(), computeStream()),
                     "slice_grad");
      !s)
    return s;
  Strides whole = contiguous(dx.shape), st;
  int64_t base = 0;
  for (size_t d = 0; d < dx.shape.size(); ++d) {
    st.s[d] = whole.s[d] * strides[d];
    base += starts[d] * whole.s[d];
  }
  return moveBytes(dy, dx.data, dy.shape, contiguous(dy.shape), 0, st, base,
                   "slice_grad");
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
  if (ids.numel() * rowBytes == 0)
    return Status::success();
  int word = wordBytesFor(rowBytes, {reinterpret_cast<uintptr_t>(table.data),
                                     reinterpret_cast<uintptr_t>(out.data)});
  withWord(word, [&](auto w) {
    using W = decltype(w);
    vocabEmbeddingKernel<<<rowBlocks(ids.numel()), kThreads, 0,
                           computeStream()>>>(
        static_cast<const W *>(table.data), ids.data, ids.dtype == DType::I64,
        static_cast<W *>(out.data), ids.numel(), rows, rowBytes / word, offset,
        vocab);
  });
  return launched("vocab-parallel embedding");
}

} // namespace mp::rt::cuda
