//===- Plans.cpp - the CUDA backend's index arithmetic --------------------===//
#include "Plans.h"

#include "mp/Runtime/Tensor.h"

#include <functional>
#include <numeric>

namespace mp::rt::cuda {

namespace {

int64_t product(const std::vector<int64_t> &v) {
  return std::accumulate(v.begin(), v.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

/// The element offset of batch element `index` of `batch` in an operand
/// whose batch dims are `own` (1 where it broadcasts), `matrix` elements
/// per batch element.
int64_t batchOffset(int64_t index, const std::vector<int64_t> &batch,
                    const std::vector<int64_t> &own, int64_t matrix) {
  int64_t offset = 0, stride = matrix;
  for (size_t d = batch.size(); d-- > 0;) {
    int64_t coord = index % batch[d];
    index /= batch[d];
    if (own[d] != 1)
      offset += coord * stride;
    stride *= own[d];
  }
  return offset;
}

} // namespace

void coalesce(Dims &dims, std::initializer_list<Strides *> operands) {
  Dims merged;
  std::vector<Strides> strides(operands.size());
  for (int d = 0; d < dims.rank; ++d) {
    if (dims.size[d] == 1)
      continue;
    int last = merged.rank - 1;
    bool joins = last >= 0;
    size_t i = 0;
    for (const Strides *st : operands)
      joins = joins && strides[i++].s[last] == st->s[d] * dims.size[d];
    if (!joins) {
      last = merged.rank++;
      merged.size[last] = 1;
    }
    merged.size[last] *= dims.size[d];
    i = 0;
    for (const Strides *st : operands)
      strides[i++].s[last] = st->s[d];
  }
  dims = merged;
  size_t i = 0;
  for (Strides *st : operands)
    *st = strides[i++];
}

int wordBytesFor(int64_t bytes, std::initializer_list<uintptr_t> pointers) {
  for (int word : {16, 8, 4, 2}) {
    bool fits = bytes % word == 0;
    for (uintptr_t p : pointers)
      fits = fits && p % word == 0;
    if (fits)
      return word;
  }
  return 1;
}

MovePlan planMove(const std::vector<int64_t> &shape, Strides in, int64_t inBase,
                  Strides out, int64_t outBase, int elemBytes, uintptr_t inPtr,
                  uintptr_t outPtr) {
  MovePlan plan{dimsOf(shape), in, out, inBase, outBase, elemBytes};
  coalesce(plan.dims, {&plan.in, &plan.out});
  int last = plan.dims.rank - 1;
  if (last < 0 || plan.in.s[last] != 1 || plan.out.s[last] != 1)
    return plan;
  // Elements per word: the widest that every count in elements allows.
  auto divides = [&](int64_t f) {
    bool ok = plan.dims.size[last] % f == 0 && plan.inBase % f == 0 &&
              plan.outBase % f == 0;
    for (int d = 0; d < last; ++d)
      ok = ok && plan.in.s[d] % f == 0 && plan.out.s[d] % f == 0;
    return ok;
  };
  for (int word : {16, 8, 4, 2}) {
    int64_t f = word / elemBytes;
    if (word <= elemBytes || word % elemBytes != 0 || !divides(f) ||
        (inPtr | outPtr) % word != 0)
      continue;
    plan.dims.size[last] /= f;
    for (int d = 0; d < last; ++d) {
      plan.in.s[d] /= f;
      plan.out.s[d] /= f;
    }
    plan.inBase /= f;
    plan.outBase /= f;
    plan.wordBytes = word;
    break;
  }
  return plan;
}

std::vector<RowMajorGemm>
matmulPlan(std::vector<int64_t> a, std::vector<int64_t> b, std::string &error) {
  if (a.empty() || b.empty()) {
    error = "matmul: operands must have rank >= 1";
    return {};
  }
  std::string shapes = formatShape(a) + " and " + formatShape(b);
  if (a.size() == 1)
    a.insert(a.begin(), 1);
  if (b.size() == 1)
    b.push_back(1);
  RowMajorGemm g;
  g.m = a[a.size() - 2];
  g.k = a.back();
  g.n = b.back();
  if (b[b.size() - 2] != g.k) {
    error = "matmul: inner dimensions of " + shapes + " differ";
    return {};
  }
  std::vector<int64_t> aBatch(a.begin(), a.end() - 2),
      bBatch(b.begin(), b.end() - 2);
  size_t rank = std::max(aBatch.size(), bBatch.size());
  aBatch.insert(aBatch.begin(), rank - aBatch.size(), 1);
  bBatch.insert(bBatch.begin(), rank - bBatch.size(), 1);
  std::vector<int64_t> batch(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (aBatch[d] != bBatch[d] && aBatch[d] != 1 && bBatch[d] != 1) {
      error = "matmul: batch dimensions of " + shapes + " do not broadcast";
      return {};
    }
    batch[d] = aBatch[d] == 1 ? bBatch[d] : aBatch[d];
  }
  int64_t count = product(batch);
  if (product(bBatch) == 1) { // one shared right operand: one tall GEMM
    g.m *= count;
    return {g};
  }
  g.strideB = g.k * g.n;
  g.strideC = g.m * g.n;
  if (aBatch == bBatch || product(aBatch) == 1) {
    g.batch = count;
    g.strideA = product(aBatch) == 1 ? 0 : g.m * g.k;
    return {g};
  }
  // Both sides broadcast along different dims: one GEMM per batch element.
  std::vector<RowMajorGemm> calls;
  for (int64_t i = 0; i < count; ++i) {
    RowMajorGemm one = g;
    one.strideB = one.strideC = 0;
    one.offsetA = batchOffset(i, batch, aBatch, g.m * g.k);
    one.offsetB = batchOffset(i, batch, bBatch, g.k * g.n);
    one.offsetC = i * g.m * g.n;
    calls.push_back(one);
  }
  return calls;
}

std::vector<AttentionChunk> attentionChunks(const AttentionShape &s,
                                            int64_t bytesPerScore,
                                            int64_t budgetBytes) {
  std::vector<AttentionChunk> chunks;
  const int64_t rowsPerPair = s.rowsPerPair(), pairs = s.pairs();
  if (rowsPerPair == 0 || pairs == 0)
    return chunks;
  const int64_t rowBytes = std::max<int64_t>(s.keys * bytesPerScore, 1);
  const int64_t pairBytes = rowsPerPair * rowBytes;
  if (pairBytes <= budgetBytes) {
    const int64_t step = std::max<int64_t>(budgetBytes / pairBytes, 1);
    for (int64_t p = 0; p < pairs; p += step)
      chunks.push_back({p, std::min(step, pairs - p), 0, rowsPerPair});
    return chunks;
  }
  const int64_t step = std::max<int64_t>(budgetBytes / rowBytes, 1);
  for (int64_t p = 0; p < pairs; ++p)
    for (int64_t r = 0; r < rowsPerPair; r += step)
      chunks.push_back({p, 1, r, std::min(step, rowsPerPair - r)});
  return chunks;
}

int64_t attentionScratchBytes(const AttentionShape &s, int64_t bytesPerScore,
                              int64_t budgetBytes) {
  int64_t bytes = 0;
  for (const AttentionChunk &c : attentionChunks(s, bytesPerScore, budgetBytes))
    bytes = std::max(bytes, c.pairs * c.rows * s.keys * bytesPerScore);
  return bytes;
}

RowMajorGemm attentionScoresGemm(const AttentionShape &s,
                                 const AttentionChunk &c) {
  RowMajorGemm g;
  g.m = c.rows;
  g.n = s.keys;
  g.k = s.headDim;
  g.transB = true;
  g.batch = c.pairs;
  g.strideA = s.rowsPerPair() * s.headDim;
  g.strideB = s.keys * s.headDim;
  g.strideC = c.rows * s.keys;
  g.offsetA = c.rowBase(s) * s.headDim;
  g.offsetB = c.firstPair * s.keys * s.headDim;
  return g;
}

RowMajorGemm attentionValuesGemm(const AttentionShape &s,
                                 const AttentionChunk &c) {
  RowMajorGemm g;
  g.m = c.rows;
  g.n = s.valueDim;
  g.k = s.keys;
  g.batch = c.pairs;
  g.strideA = c.rows * s.keys;
  g.strideB = s.keys * s.valueDim;
  g.strideC = s.rowsPerPair() * s.valueDim;
  g.offsetB = c.firstPair * s.keys * s.valueDim;
  g.offsetC = c.rowBase(s) * s.valueDim;
  return g;
}

namespace {

/// Per pair of a chunk, [keys, width] += Sᵀ [keys, rows] · R [rows, width]:
/// S the chunk's [rows, keys] scratch (P or dS), R the chunk's rows of a
/// [B·H·Sq, width] tensor (dO or Q), the result a [B·Hkv·Sk, width] one
/// (dV or dK) accumulated over the chunks of a pair.
RowMajorGemm keysFromRowsGemm(const AttentionShape &s, const AttentionChunk &c,
                              int64_t width) {
  RowMajorGemm g;
  g.m = s.keys;
  g.n = width;
  g.k = c.rows;
  g.transA = true;
  g.accumulate = true;
  g.batch = c.pairs;
  g.strideA = c.rows * s.keys;
  g.strideB = s.rowsPerPair() * width;
  g.offsetB = c.rowBase(s) * width;
  g.strideC = s.keys * width;
  g.offsetC = c.firstPair * s.keys * width;
  return g;
}

} // namespace

AttentionGradGemms attentionGradGemms(const AttentionShape &s,
                                      const AttentionChunk &c) {
  const int64_t scores = c.rows * s.keys;
  const int64_t rowPitch = s.rowsPerPair(); // rows of a pair in q, dO, dQ
  AttentionGradGemms g;
  // dV[pair] += Pᵀ · dO.
  g.valueGrad = keysFromRowsGemm(s, c, s.valueDim);
  // dP [rows, keys] = dO [rows, Dv] · V[pair]ᵀ.
  RowMajorGemm &dp = g.probabilityGrad;
  dp.m = c.rows;
  dp.n = s.keys;
  dp.k = s.valueDim;
  dp.transB = true;
  dp.batch = c.pairs;
  dp.strideA = rowPitch * s.valueDim;
  dp.offsetA = c.rowBase(s) * s.valueDim;
  dp.strideB = s.keys * s.valueDim;
  dp.offsetB = c.firstPair * s.keys * s.valueDim;
  dp.strideC = scores;
  // dQ [rows, D] = scale · dS [rows, keys] · K[pair] [keys, D].
  RowMajorGemm &dq = g.queryGrad;
  dq.m = c.rows;
  dq.n = s.headDim;
  dq.k = s.keys;
  dq.batch = c.pairs;
  dq.strideA = scores;
  dq.strideB = s.keys * s.headDim;
  dq.offsetB = c.firstPair * s.keys * s.headDim;
  dq.strideC = rowPitch * s.headDim;
  dq.offsetC = c.rowBase(s) * s.headDim;
  // dK[pair] += scale · dSᵀ · Q.
  g.keyGrad = keysFromRowsGemm(s, c, s.headDim);
  return g;
}

RowMajorGemm linearWeightGradGemm(int64_t rows, int64_t k, int64_t n,
                                  bool transposeWeight) {
  RowMajorGemm g;
  g.m = transposeWeight ? n : k;
  g.n = transposeWeight ? k : n;
  g.k = rows;
  g.transA = true;
  return g;
}

} // namespace mp::rt::cuda
