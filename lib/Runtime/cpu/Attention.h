//===- Attention.h - attention probabilities for the CPU kernels --*- C++
//-*-===//
//
// Private to lib/Runtime/cpu: the softmax of one block of query rows'
// scores, which the forward kernel (attention) computes and the backward
// (attentionGrad) recomputes from q and k instead of storing S×S.
//
//===----------------------------------------------------------------------===//
#ifndef MP_LIB_RUNTIME_CPU_ATTENTION_H
#define MP_LIB_RUNTIME_CPU_ATTENTION_H

#include "Common.h"
#include "Dnnl.h"
#include "Gemm.h"

#include <limits>

namespace mp::rt::cpu {

/// One GEMM of an attention block (forward or backward): oneDNN's kernel
/// where smallGemm takes it, OpenBLAS's otherwise.
inline void attentionGemm(const SmallGemm &g) {
  if (!smallGemm(g))
    gemm(g.transA, g.transB, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb,
         g.accumulate ? 1.0f : 0.0f, g.c, g.ldc);
}

/// P [rows, keys] = softmax(q·kᵀ·scale + mask) of query rows i0 … i0+rows
/// of one (batch, head): qb [rows, D], kb [keys, D]. With `causal`, key j
/// of row i is dropped when j > i + offset; `maskHead` is the mask at this
/// (batch, head) (null: none), rows apart by `maskRow` elements, its keys
/// contiguous (`maskKeys` 1) or one value broadcast (0). Dropped keys and
/// fully masked rows are zeros.
inline void attentionProbabilities(const float *qb, const float *kb,
                                   int64_t rows, int64_t keys, int64_t D,
                                   float scale, int64_t i0, int64_t offset,
                                   bool causal, const float *maskHead,
                                   int64_t maskRow, int64_t maskKeys,
                                   float *P) {
  if (D == 0)
    std::fill(P, P + rows * keys, 0.0f);
  else
    attentionGemm({rows, keys, D, scale, qb, D, false, kb, D, true, P, keys});
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i = i0 + r;
    float *s = P + r * keys;
    const int64_t lim =
        causal ? std::clamp<int64_t>(i + offset + 1, 0, keys) : keys;
    if (maskHead) {
      const float *mrow = maskHead + i * maskRow;
      if (maskKeys == 1) {
        for (int64_t j = 0; j < lim; ++j)
          s[j] += mrow[j];
      } else {
        const float mv = mrow[0];
        for (int64_t j = 0; j < lim; ++j)
          s[j] += mv;
      }
    }
    const float mx = detail::maxOf(s, lim);
    if (mx == -std::numeric_limits<float>::infinity()) {
      // Fully masked row: zeros rather than NaN.
      std::fill(s, s + keys, 0.0f);
      continue;
    }
    const float inv = 1.0f / detail::expSubSum(s, mx, s, lim);
    for (int64_t j = 0; j < lim; ++j)
      s[j] *= inv;
    std::fill(s + lim, s + keys, 0.0f);
  }
}

} // namespace mp::rt::cpu

#endif // MP_LIB_RUNTIME_CPU_ATTENTION_H
