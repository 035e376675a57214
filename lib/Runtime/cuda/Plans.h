//===- Plans.h - the CUDA backend's index arithmetic, testable on a CPU -*- C++
//-*-===//
//
// What the CUDA kernels compute is decided on the host: the cuBLAS calls a
// matmul or an attention becomes, how attention is cut into chunks that fit
// its scratch, and which scores a mask or causality hides. That arithmetic
// lives here, in plain C++ (the few functions kernels also call are marked
// MP_HOST_DEVICE), so the CPU unit tests run it against the CPU kernels on
// machines without a GPU (unittests/Runtime/CudaPlansTest.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef MP_RUNTIME_CUDA_PLANS_H
#define MP_RUNTIME_CUDA_PLANS_H

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "mp/Support/HostDevice.h"
#include "mp/Support/IntegerArithmetic.h"

namespace mp::rt::cuda {

/// The most dimensions a CUDA kernel takes (the executor checks every
/// tensor against it when it binds a program to the CUDA kernels).
constexpr int kMaxRank = 8;

/// A shape and per-operand element strides, passed to kernels by value.
struct Dims {
  int rank = 0;
  int64_t size[kMaxRank] = {};
};
struct Strides {
  int64_t s[kMaxRank] = {};
};

inline Dims dimsOf(const std::vector<int64_t> &shape) {
  Dims d;
  d.rank = static_cast<int>(shape.size());
  for (int i = 0; i < d.rank; ++i)
    d.size[i] = shape[i];
  return d;
}

/// Strides of `in` aligned to `out`'s dims (numpy broadcasting); 0 where
/// `in` broadcasts.
inline Strides broadcastStrides(const std::vector<int64_t> &out,
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

/// q = a / b and r = a % b for a >= 0, b > 0, in 32 bits where both fit:
/// 64-bit division is a long subroutine on a GPU.
MP_HOST_DEVICE inline void divMod(int64_t a, int64_t b, int64_t &q,
                                  int64_t &r) {
  if (((a | b) >> 32) == 0) {
    uint32_t q32 = static_cast<uint32_t>(a) / static_cast<uint32_t>(b);
    q = q32;
  } else {
    q = a / b;
  }
  r = a - q * b;
}

/// The element offset, under `st`, of the `index`-th element (row-major) of
/// `dims`. The loop runs over every possible dim, so that once unrolled it
/// indexes `dims` and `st` by constants and a kernel reads them from its
/// parameters: a variable index makes every thread copy them to local
/// memory, which made the elementwise kernels about 50x slower than memory
/// bandwidth on an H200. The outermost dim needs no division (the index is
/// below its size by then), so a coalesced same-shape operand needs none.
MP_HOST_DEVICE inline int64_t offsetOf(int64_t index, const Dims &dims,
                                       const Strides &st) {
  if (dims.rank == 0)
    return 0;
  int64_t off = 0;
  MP_UNROLL
  for (int d = kMaxRank - 1; d > 0; --d) {
    if (d < dims.rank) {
      int64_t q, r;
      divMod(index, dims.size[d], q, r);
      off += r * st.s[d];
      index = q;
    }
  }
  return off + index * st.s[0];
}

/// Merges adjacent dims that every operand walks as one (outer stride =
/// inner stride x inner size) and drops dims of size 1, so kernels divide
/// less per element: a same-shape elementwise op becomes one dim. Every
/// index keeps its offsets.
void coalesce(Dims &dims, std::initializer_list<Strides *> operands);

/// A copy of the elements of an index space between two strided views, in
/// words of `wordBytes`: planMove widens the elements to the largest word
/// (up to 16 bytes) that the innermost dim, every stride, both bases and
/// both pointers allow, so that a split, slice, concat or transpose whose
/// rows are contiguous moves 16 bytes per thread instead of 2 or 4. Strides
/// and bases are in words.
struct MovePlan {
  Dims dims;
  Strides in, out;
  int64_t inBase = 0, outBase = 0;
  int wordBytes = 1;
};
MovePlan planMove(const std::vector<int64_t> &shape, Strides in, int64_t inBase,
                  Strides out, int64_t outBase, int elemBytes, uintptr_t inPtr,
                  uintptr_t outPtr);

/// The widest word (16, 8, 4, 2 or 1 bytes) that divides `bytes` and every
/// address in `pointers`: the word a row copy can move.
int wordBytesFor(int64_t bytes, std::initializer_list<uintptr_t> pointers);

//===----------------------------------------------------------------------===//
// GEMMs
//===----------------------------------------------------------------------===//

/// Row-major C[M,N] = alpha · op(A) · op(B) (+ C when `accumulate`):
/// op(A) = A[M,K], or A[K,M] transposed when `transA`; op(B) = B[K,N], or
/// B[N,K] transposed when `transB`; `batch` times, operand i at `offset +
/// i * stride` elements from its base pointer.
struct RowMajorGemm {
  int64_t m = 0, n = 0, k = 0;
  bool transA = false, transB = false;
  bool accumulate = false;
  int64_t batch = 1;
  int64_t strideA = 0, strideB = 0, strideC = 0;
  int64_t offsetA = 0, offsetB = 0, offsetC = 0;
};

/// Element offsets, from the operands' base pointers, of op(A)[batch][i][kk],
/// op(B)[batch][kk][j] and C[batch][i][j] (C rows are contiguous).
MP_HOST_DEVICE inline int64_t gemmOffsetA(const RowMajorGemm &g, int64_t batch,
                                          int64_t i, int64_t kk) {
  return g.offsetA + batch * g.strideA +
         (g.transA ? kk * g.m + i : i * g.k + kk);
}
MP_HOST_DEVICE inline int64_t gemmOffsetB(const RowMajorGemm &g, int64_t batch,
                                          int64_t kk, int64_t j) {
  return g.offsetB + batch * g.strideB +
         (g.transB ? j * g.k + kk : kk * g.n + j);
}
MP_HOST_DEVICE inline int64_t gemmOffsetC(const RowMajorGemm &g, int64_t batch,
                                          int64_t i, int64_t j) {
  return g.offsetC + batch * g.strideC + i * g.n + j;
}

/// C[batch][i][j] of an integer GEMM with the CPU kernel's wrap-around
/// (cuBLAS has no integer GEMM of these types; a CUDA kernel computes
/// each element with this).
template <class T>
MP_HOST_DEVICE inline T integerGemmElement(const RowMajorGemm &g, const T *a,
                                           const T *b, int64_t batch, int64_t i,
                                           int64_t j) {
  T acc = 0;
  for (int64_t kk = 0; kk < g.k; ++kk)
    acc = wrapAdd(acc, wrapMul(a[gemmOffsetA(g, batch, i, kk)],
                               b[gemmOffsetB(g, batch, kk, j)]));
  return acc;
}

/// The same GEMM as cublasGemmStridedBatchedEx sees it (column-major):
/// C^T[N,M] = op(B)^T · op(A)^T, so cuBLAS's first operand is our B and its
/// second our A. Fields are in the call's argument order; beta is 1 when
/// `accumulate`, else 0.
struct ColumnMajorGemm {
  bool transFirst = false, transSecond = false, accumulate = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t ldFirst = 0, strideFirst = 0, offsetFirst = 0;
  int64_t ldSecond = 0, strideSecond = 0, offsetSecond = 0;
  int64_t ldC = 0, strideC = 0, offsetC = 0;
  int64_t batch = 1;
};

inline ColumnMajorGemm columnMajor(const RowMajorGemm &g) {
  ColumnMajorGemm c;
  c.transFirst = g.transB;
  c.m = g.n;
  c.n = g.m;
  c.k = g.k;
  c.ldFirst = g.transB ? g.k : g.n;
  c.strideFirst = g.strideB;
  c.offsetFirst = g.offsetB;
  c.transSecond = g.transA;
  c.accumulate = g.accumulate;
  c.ldSecond = g.transA ? g.m : g.k;
  c.strideSecond = g.strideA;
  c.offsetSecond = g.offsetA;
  c.ldC = g.n;
  c.strideC = g.strideC;
  c.offsetC = g.offsetC;
  c.batch = g.batch;
  return c;
}

/// The GEMMs of an ONNX MatMul (numpy broadcasting of the batch dims, 1-D
/// operands promoted). One strided-batched call when the batch dims of `a`
/// and `b` are equal or one side has none; otherwise one call per batch
/// element. Empty with `error` set for shapes that do not broadcast.
std::vector<RowMajorGemm>
matmulPlan(std::vector<int64_t> a, std::vector<int64_t> b, std::string &error);

//===----------------------------------------------------------------------===//
// Attention as two strided-batched GEMMs around a masked softmax
//===----------------------------------------------------------------------===//

/// q [B,H,Sq,D], k [B,Hkv,Sk,D], v [B,Hkv,Sk,Dv] (H a multiple of Hkv).
struct AttentionShape {
  int64_t batch, heads, kvHeads, queries, keys, headDim, valueDim;
  int64_t group() const { return heads / kvHeads; }
  /// Whether the query heads group into the key/value heads.
  bool groupsEvenly() const { return kvHeads > 0 && heads % kvHeads == 0; }
  /// The query heads of one (batch, kv head) pair are contiguous in q and in
  /// the output: group() * queries rows.
  int64_t rowsPerPair() const { return group() * queries; }
  int64_t pairs() const { return batch * kvHeads; }
};

/// A part of the attention that fits the scratch: `pairs` whole (batch, kv
/// head) pairs from `firstPair`, or, when one pair is too big, `rows` of the
/// rows of pair `firstPair` from `firstRow`. Scores are [pairs, rows, keys].
struct AttentionChunk {
  int64_t firstPair = 0, pairs = 1, firstRow = 0, rows = 0;
  /// Global score row (of B*H*Sq, i.e. ((b*H + h)*Sq + i)) of chunk row 0;
  /// chunk row r is global row rowBase() + r.
  int64_t rowBase(const AttentionShape &s) const {
    return firstPair * s.rowsPerPair() + firstRow;
  }
};

/// Chunks covering the attention, each at most `budgetBytes` of scores at
/// `bytesPerScore` (whatever a score row needs, fp32 logits plus
/// probabilities); at least one row per chunk.
std::vector<AttentionChunk> attentionChunks(const AttentionShape &s,
                                            int64_t bytesPerScore,
                                            int64_t budgetBytes);

/// The scores of a chunk stay within this (the CUDA attention's scratch).
constexpr int64_t kAttentionScratchBudget = 256LL << 20;

/// Scratch bytes per score: its fp32 logit and, when the element type is not
/// fp32, its probability in that type (fp32 probabilities overwrite the
/// logits).
inline int64_t attentionBytesPerScore(int64_t elementBytes, bool fp32) {
  return 4 + (fp32 ? 0 : elementBytes);
}

/// The scratch the chunks of `attentionChunks(s, bytesPerScore, budget)`
/// need: the largest chunk's scores.
int64_t attentionScratchBytes(const AttentionShape &s, int64_t bytesPerScore,
                              int64_t budgetBytes);

/// scores[pairs, rows, keys] = scale · Q · K^T for a chunk (offsets into q,
/// k and the chunk's scores buffer).
RowMajorGemm attentionScoresGemm(const AttentionShape &s,
                                 const AttentionChunk &c);
/// out = P · V for a chunk (offsets into the probabilities, v and out).
RowMajorGemm attentionValuesGemm(const AttentionShape &s,
                                 const AttentionChunk &c);

/// The GEMMs of attention's backward for a chunk, after its probabilities
/// P [pairs, rows, keys] are recomputed (scores GEMM and softmax, as the
/// forward) into fp32 scratch, with dP beside them (same layout):
///   dV[pair] += Pᵀ · dO,  dP = dO · Vᵀ,  (dS = P ∘ (dP − rowsum(dO ∘ O))
///   in place of dP, a kernel),  dQ = scale · dS · K,
///   dK[pair] += scale · dSᵀ · Q.
/// dK and dV accumulate over the chunks of a pair (zeroed first); each
/// row's dQ is written by its one chunk.
struct AttentionGradGemms {
  RowMajorGemm valueGrad, probabilityGrad, queryGrad, keyGrad;
};
AttentionGradGemms attentionGradGemms(const AttentionShape &s,
                                      const AttentionChunk &c);
/// Scratch bytes per score of attention's backward: P and dP in fp32.
constexpr int64_t kAttentionGradBytesPerScore = 8;

/// dW = Σ x[..., K]ᵀ · dy[..., N] over the `rows` leading positions: [K, N],
/// or [N, K] = dyᵀ · x when `transposeWeight` (A = x or dy, B = dy or x).
RowMajorGemm linearWeightGradGemm(int64_t rows, int64_t k, int64_t n,
                                  bool transposeWeight);

/// Whether query `i` of `queries` may see key `j` of `keys`: always, or,
/// when causal, keys up to its own position with the queries aligned to the
/// last keys (a decode step sees the whole cache).
MP_HOST_DEVICE inline bool keyVisible(int64_t i, int64_t j, int64_t queries,
                                      int64_t keys, bool causal) {
  return !causal || j <= i + (keys - queries);
}

} // namespace mp::rt::cuda

#endif // MP_RUNTIME_CUDA_PLANS_H
